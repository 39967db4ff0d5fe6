import { z } from 'zod';
import { ApiKeys, Id } from './common.js';
import { Flow, SimpleEdge, SimpleNode } from './flow.js';
import { TurnMetrics } from './metrics.js';
import { SessionType } from './sessions.js';

export const LivekitCredentials = z.object({
  url: z.string().min(1).max(2000),
  apiKey: z.string().min(1).max(500),
  apiSecret: z.string().min(1).max(500),
});
export type LivekitCredentials = z.infer<typeof LivekitCredentials>;

/**
 * The media server credentials a request may send: a missing, null or empty field falls back to the
 * server's environment (the spec: "when omitted, values come from environment variables").
 */
export const LivekitOverrides = z
  .object({
    url: z.string().max(2000).nullish(),
    apiKey: z.string().max(500).nullish(),
    apiSecret: z.string().max(500).nullish(),
  })
  .nullish();
export type LivekitOverrides = z.infer<typeof LivekitOverrides>;

export const AgentSessionRequest = z.object({
  nodes: z.array(SimpleNode),
  edges: z.array(SimpleEdge),
  livekit: LivekitOverrides,
  apiKeys: ApiKeys.nullish(),
  /** Record the run as a voice test session of this stored agent. */
  agentId: Id.nullish(),
  /** false: the session's audio is not recorded (recordings are on unless the operator set `RECORDINGS=off`). */
  record: z.boolean().default(true),
});
export type AgentSessionRequest = z.infer<typeof AgentSessionRequest>;

export const PlaygroundSession = z.object({
  token: z.string(),
  roomName: z.string(),
  serverUrl: z.string(),
});
export type PlaygroundSession = z.infer<typeof PlaygroundSession>;

export const EndAgentSessionBody = z.object({ roomName: z.string().min(1).max(200) });
export type EndAgentSessionBody = z.infer<typeof EndAgentSessionBody>;

export const ProviderKeyStatus = z.object({
  envKeys: z.object({
    openai: z.boolean(),
    anthropic: z.boolean(),
    elevenlabs: z.boolean(),
    deepgram: z.boolean(),
    livekit: z.boolean(),
  }),
  setupRequired: z.boolean(),
});
export type ProviderKeyStatus = z.infer<typeof ProviderKeyStatus>;

/**
 * Every stable code a flow check reports: the compiler's (is the graph runnable at all) and the readiness
 * check's (can this server run it: providers, URLs). Builders map them to their UI; they never change meaning.
 */
export const FlowIssueCode = z.enum([
  'NO_AGENT',
  'MULTIPLE_AGENTS',
  'MISSING_LLM',
  'MISSING_TTS',
  'MISSING_STT',
  'HANDLE_TAKEN',
  'NO_START',
  'MULTIPLE_STARTS',
  'AGENT_NOT_CONNECTED_TO_START',
  'DUPLICATE_NODE_ID',
  'UNKNOWN_NODE_TYPE',
  'EDGE_UNKNOWN_NODE',
  'EDGE_UNKNOWN_HANDLE',
  'EDGE_WRONG_KIND',
  'MULTIPLE_NEXT',
  'MISSING_NEXT',
  'UNREACHABLE_STEP',
  'BRANCH_EXIT_UNCONNECTED',
  'BRANCH_AFTER_START',
  'CATEGORY_HANDLES_MISMATCH',
  'NO_EXIT_PATH',
  'PARAM_MISSING',
  'PARAM_OUT_OF_RANGE',
  // readiness: what this server can run
  'PROVIDER_UNSUPPORTED',
  'BASE_URL_UNSUPPORTED',
  'URL_NOT_ALLOWED',
]);
export type FlowIssueCode = z.infer<typeof FlowIssueCode>;

/** One finding of a flow check: a stable code, a message a builder can show, and where. */
export const FlowIssue = z.object({
  code: FlowIssueCode,
  message: z.string(),
  nodeId: z.string().optional(),
  /** Edges have no id in the builder's format: they are named by their position in `edges`. */
  edgeIndex: z.number().int().nonnegative().optional(),
});
export type FlowIssue = z.infer<typeof FlowIssue>;

export const ValidateFlowBody = Flow.extend({
  /** Which kind of session to check the flow for (default voice: it needs the most). */
  sessionType: SessionType.default('voice'),
});
export type ValidateFlowBody = z.infer<typeof ValidateFlowBody>;

/** A provider a runnable flow uses, and where its key would come from. */
export const ProviderRequirement = z.object({
  provider: z.string(),
  nodeIds: z.array(z.string()),
  /**
   * `server`: the server has a key it may use here; `request`: send one in `apiKeys`; `none`: every use is at
   * the flow's own `baseURL` (a local model server), which runs without a key unless one is sent.
   */
  key: z.enum(['server', 'request', 'none']),
});
export type ProviderRequirement = z.infer<typeof ProviderRequirement>;

export const FlowValidation = z.object({
  valid: z.boolean(),
  sessionType: SessionType,
  issues: z.array(FlowIssue),
  /** The providers the flow would use (empty while it does not compile). */
  requirements: z.array(ProviderRequirement),
});
export type FlowValidation = z.infer<typeof FlowValidation>;

// ---- text test sessions (beyond the spec) ----

export const StartTextSessionBody = z.object({
  /** A flow to try instead of the agent's latest stored one (e.g. unsaved edits). */
  flow: Flow.nullish(),
  /** A stored version to run instead of the latest (not with `flow`). */
  version: z.number().int().positive().nullish(),
  /** Provider keys by provider id (openai, anthropic, groq, …); the server environment is the fallback. */
  apiKeys: ApiKeys.nullish(),
});
export type StartTextSessionBody = z.infer<typeof StartTextSessionBody>;

export const TextTurnBody = z.object({ text: z.string().trim().min(1).max(4000) });
export type TextTurnBody = z.infer<typeof TextTurnBody>;

export const StepChange = z.object({ stepId: z.string(), stepType: z.string() });
export type StepChange = z.infer<typeof StepChange>;

/**
 * How a model call of a turn failed: `unreachable` (no connection: refused, reset, no such host, or refused
 * by the egress policy — one kind, so an answer never tells a closed port from an open one), `timeout`,
 * `auth` (401/403: the key), `rate_limited` (429), `http_error` (any other status), `failed` (anything else).
 */
export const TurnFailureKind = z.enum([
  'unreachable',
  'timeout',
  'auth',
  'rate_limited',
  'http_error',
  'failed',
]);
export type TurnFailureKind = z.infer<typeof TurnFailureKind>;

/** A turn that did not get its answer: which node's model failed, how, and a message without URLs or keys. */
export const TurnFailure = z.object({
  nodeId: z.string().max(200),
  /** `llm`, `tts` or `stt`. */
  modality: z.enum(['llm', 'tts', 'stt']),
  kind: TurnFailureKind,
  /** The HTTP status, for `auth`, `rate_limited` and `http_error`. */
  status: z.number().int().optional(),
  message: z.string().max(500),
});
export type TurnFailure = z.infer<typeof TurnFailure>;

export const TextTurnResult = z.object({
  /** The test session (sessionType "text") that records this conversation. */
  sessionId: Id,
  /** What the agent said in answer, in order. */
  replies: z.array(z.string()),
  stepId: z.string(),
  stepType: z.string(),
  /** Every step entered during this turn, in order (a branch passed through included). */
  stepChanges: z.array(StepChange),
  ended: z.boolean(),
  /** The id of the session's last event after this turn: its events stream resumes from here. */
  lastEventId: z.number().int().nonnegative().optional(),
  /** What this turn took (ms): the model's time to first token and duration, tool time, the whole turn. */
  metrics: TurnMetrics.optional(),
  /**
   * Present when the turn failed: a model of the flow could not answer (the first failure of the turn). The
   * answer is still 200 — the session goes on and the next turn may succeed — but `replies` lacks what that
   * model should have said, and figures it could not measure are absent.
   */
  error: TurnFailure.optional(),
});
export type TextTurnResult = z.infer<typeof TextTurnResult>;
/** A turn's result inside a playground instance (the host adds the session's id). */
export type TurnResult = Omit<TextTurnResult, 'sessionId'>;
