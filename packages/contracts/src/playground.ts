import { z } from 'zod';
import { Id } from './common.js';
import { Flow, SimpleEdge, SimpleNode } from './flow.js';

export const LivekitCredentials = z.object({
  url: z.string().min(1).max(2000),
  apiKey: z.string().min(1).max(500),
  apiSecret: z.string().min(1).max(500),
});
export type LivekitCredentials = z.infer<typeof LivekitCredentials>;

export const AgentSessionRequest = z.object({
  nodes: z.array(SimpleNode),
  edges: z.array(SimpleEdge),
  livekit: LivekitCredentials.optional(),
  apiKeys: z.record(z.string().max(100), z.string().max(2000)).optional(),
  /** Record the run as a voice test session of this stored agent. */
  agentId: Id.optional(),
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

/** One finding of the flow compiler (packages/flow): a stable code, a message, and where. */
export const FlowIssue = z.object({
  code: z.string(),
  message: z.string(),
  nodeId: z.string().optional(),
  edgeIndex: z.number().int().nonnegative().optional(),
});
export type FlowIssue = z.infer<typeof FlowIssue>;

export const FlowValidation = z.object({ valid: z.boolean(), issues: z.array(FlowIssue) });
export type FlowValidation = z.infer<typeof FlowValidation>;

// ---- text test sessions (beyond the spec) ----

export const ApiKeys = z.record(z.string().max(100), z.string().max(2000));

export const StartTextSessionBody = z.object({
  /** A flow to try instead of the agent's latest stored one (e.g. unsaved edits). */
  flow: Flow.optional(),
  /** Provider keys by provider id (openai, anthropic, groq); the server environment is the fallback. */
  apiKeys: ApiKeys.optional(),
});
export type StartTextSessionBody = z.infer<typeof StartTextSessionBody>;

export const TextTurnBody = z.object({ text: z.string().trim().min(1).max(4000) });
export type TextTurnBody = z.infer<typeof TextTurnBody>;

export const StepChange = z.object({ stepId: z.string(), stepType: z.string() });
export type StepChange = z.infer<typeof StepChange>;

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
});
export type TextTurnResult = z.infer<typeof TextTurnResult>;

export const TextSessionParams = z.object({ id: Id, sessionId: Id });
export type TextSessionParams = z.infer<typeof TextSessionParams>;
