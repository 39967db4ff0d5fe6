import { z } from 'zod';
import { VersionDiff } from './agents.js';
import { ApiKeys, EpochMs, Id } from './common.js';
import { LatencyChange, METRIC_NAMES, SessionUsage, TurnMetrics } from './metrics.js';

/**
 * Who said something, in builder chat or a transcript: any short identifier. The usual ones are `user`,
 * `assistant` (or `agent`), `system` and `tool`; a front end with its own vocabulary keeps it.
 */
export const Role = z
  .string()
  .min(1)
  .max(32)
  .regex(
    /^[A-Za-z][A-Za-z0-9_.:-]*$/,
    'must be a short identifier (a letter, then letters, digits, _ . : -)',
  );
export type Role = z.infer<typeof Role>;

// ---- builder conversation ----------------------------------------------------------------------

/**
 * One graph edit of a builder-chat turn. Its shape is the front end's (the spec leaves it "not shown"): any
 * JSON object, stored and returned as sent. The shapes this project's own tools write are documented in
 * docs/api.md (add_node, update_node, remove_node, add_edge, remove_edge).
 */
/**
 * Any JSON value (a body is parsed JSON, so that is all it can hold). Declared as unknown, not as zod's
 * recursive JSON type, so the API document and the typed client made from it stay plain.
 */
export const JsonValue = z.unknown().describe('Any JSON value');

export const FlowOperation = z.record(z.string(), JsonValue);
export type FlowOperation = z.infer<typeof FlowOperation>;

export const ConversationEntry = z.object({
  id: Id,
  role: Role,
  content: z.string(),
  operations: z.array(FlowOperation),
  /** What the user attached to the message (usually canvas node ids): any JSON values, as sent. */
  nodeAttachments: z.array(JsonValue),
  timestamp: EpochMs,
});
export type ConversationEntry = z.infer<typeof ConversationEntry>;

export const ConversationList = z.array(ConversationEntry);
export type ConversationList = z.infer<typeof ConversationList>;

/** Counts and bytes are bounded by the sessions service (configurable there); the schema bounds the shape. */
export const CreateConversationEntryBody = z.object({
  role: Role,
  content: z.string(),
  operations: z.array(FlowOperation).max(10_000).default([]),
  nodeAttachments: z.array(JsonValue).max(1000).default([]),
});
export type CreateConversationEntryBody = z.infer<typeof CreateConversationEntryBody>;

// ---- test sessions -----------------------------------------------------------------------------

/** `test`: a regression test case run by a test run (its transcript is browsable like any other). */
export const SessionType = z.enum(['voice', 'text', 'test']);
export type SessionType = z.infer<typeof SessionType>;

export const TestSession = z.object({
  id: Id,
  agentId: Id,
  startedAt: EpochMs,
  /** null while the session is open. */
  endedAt: EpochMs.nullable(),
  durationMs: z.number().int().nonnegative().nullable(),
  roomName: z.string().nullable(),
  sessionType: SessionType,
  status: z.enum(['open', 'closed']),
  /** The agent version the session ran; null for a draft flow, or a session recorded by a client. */
  version: z.number().int().positive().nullable(),
  /** What the session used, per provider and model (filled when it closes; empty while open). */
  usage: SessionUsage,
});
export type TestSession = z.infer<typeof TestSession>;

export const TestSessionList = z.array(TestSession);
export type TestSessionList = z.infer<typeof TestSessionList>;

export const CreateTestSessionBody = z.object({
  sessionType: SessionType,
  roomName: z.string().min(1).max(200).optional(),
  /** The agent version the session runs (the playground sets it; stats are kept per version). */
  version: z.number().int().positive().nullish(),
});
export type CreateTestSessionBody = z.infer<typeof CreateTestSessionBody>;

export const CloseTestSessionBody = z.object({
  endedAt: EpochMs,
  durationMs: z.number().int().nonnegative(),
});
export type CloseTestSessionBody = z.infer<typeof CloseTestSessionBody>;

/** What the playground reports when it closes a session it ran: usage, and errors, for the stats. */
export const CloseReport = z.object({
  usage: SessionUsage,
  errors: z.number().int().nonnegative(),
});
export type CloseReport = z.infer<typeof CloseReport>;

export const TestSessionParams = z.object({ id: Id, sessionId: Id });
export type TestSessionParams = z.infer<typeof TestSessionParams>;

export const SessionMessage = z.object({
  role: Role,
  content: z.string(),
  stepId: z.string().max(200),
  timestamp: EpochMs,
  /** An agent message's turn figures (ms), when the playground measured them. */
  metrics: TurnMetrics.optional(),
});
export type SessionMessage = z.infer<typeof SessionMessage>;

export const SessionMessageList = z.array(SessionMessage);
export type SessionMessageList = z.infer<typeof SessionMessageList>;

export const AppendMessageBody = SessionMessage;
export type AppendMessageBody = z.infer<typeof AppendMessageBody>;

export const AppendedMessage = z.object({
  /** 1-based arrival position of the message within its session. */
  seq: z.number().int().positive(),
  message: SessionMessage,
});
export type AppendedMessage = z.infer<typeof AppendedMessage>;

// ---- deploys -----------------------------------------------------------------------------------

export const DeployStatus = z.enum(['pending', 'building', 'live', 'failed', 'superseded']);
export type DeployStatus = z.infer<typeof DeployStatus>;

export const DeployRecord = z.object({
  id: Id,
  agentId: Id,
  deployNumber: z.number().int().positive(),
  /** The agent version this deploy pins. */
  version: z.number().int().positive(),
  status: DeployStatus,
  subdomain: z.string(),
  createdAt: EpochMs,
  updatedAt: EpochMs,
  /** Present when it went live past a failing (or missing) test run, by the emergency override. */
  gateOverride: z.object({ reason: z.string(), at: EpochMs }).optional(),
});
export type DeployRecord = z.infer<typeof DeployRecord>;

export const DeployList = z.array(DeployRecord);
export type DeployList = z.infer<typeof DeployList>;

export const DeployParams = z.object({ id: Id, deployId: Id });
export type DeployParams = z.infer<typeof DeployParams>;

/** `superseded` is set only by the service, when a newer deploy goes live. */
export const UpdateDeployBody = z.object({
  status: z.enum(['building', 'live', 'failed']),
  /**
   * Emergency: go live although the agent's deploy gate would refuse (no passing run on this version). The
   * reason is recorded on the deploy (`gateOverride`).
   */
  override: z.object({ reason: z.string().trim().min(1).max(500) }).optional(),
});
export type UpdateDeployBody = z.infer<typeof UpdateDeployBody>;

export const EmptyBody = z.object({}).strict();
export type EmptyBody = z.infer<typeof EmptyBody>;

// ---- regression tests: cases, runs, the deploy gate ------------------------------------------------

/** What must hold for a case to pass. Every field is optional: an empty expectation passes any run. */
export const CaseExpectation = z.object({
  /** Step ids the conversation passes through, in this order (others may come between: a subsequence). */
  steps: z.array(z.string().min(1).max(200)).max(200).optional(),
  /** Whether the conversation has ended after the last turn. */
  ends: z.boolean().optional(),
  /** The step it ends on (implies `ends`). */
  endsAt: z.string().min(1).max(200).optional(),
  /** Texts the agent's replies must contain, all of them (case-insensitive, across every reply). */
  replyContains: z.array(z.string().min(1).max(2000)).max(50).optional(),
  /** Fields the structured output must have with these values (a subset match, deep-equal values). */
  structured: z.record(z.string(), JsonValue).optional(),
});
export type CaseExpectation = z.infer<typeof CaseExpectation>;

const CaseName = z.string().trim().min(1).max(200);
const CaseTurns = z.array(z.string().min(1).max(4000)).min(1).max(50);
/** A model temperature for this case only (0 makes a real model as repeatable as it gets). */
const Temperature = z.number().min(0).max(2);

export const TestCase = z.object({
  id: Id,
  agentId: Id,
  name: z.string(),
  turns: z.array(z.string()),
  expect: CaseExpectation,
  temperature: Temperature.nullable(),
  /** The recorded test session this case was made from, when it was. */
  fromSession: Id.nullable(),
  createdAt: EpochMs,
  updatedAt: EpochMs,
});
export type TestCase = z.infer<typeof TestCase>;

export const TestCaseList = z.array(TestCase);
export type TestCaseList = z.infer<typeof TestCaseList>;

/**
 * A case written by hand (`name`, `turns`, `expect`), or made from a recorded test session
 * (`fromSession`): its user turns become the turns and its observed step path the expected steps.
 */
export const CreateTestCaseBody = z.union([
  z
    .object({
      name: CaseName,
      turns: CaseTurns,
      expect: CaseExpectation.default({}),
      temperature: Temperature.optional(),
    })
    .strict(),
  z.object({ fromSession: Id, name: CaseName.optional(), temperature: Temperature.optional() }).strict(),
]);
export type CreateTestCaseBody = z.infer<typeof CreateTestCaseBody>;

export const UpdateTestCaseBody = z.object({
  name: CaseName.optional(),
  turns: CaseTurns.optional(),
  expect: CaseExpectation.optional(),
  temperature: Temperature.nullable().optional(),
});
export type UpdateTestCaseBody = z.infer<typeof UpdateTestCaseBody>;

export const TestCaseParams = z.object({ id: Id, caseId: Id });
export type TestCaseParams = z.infer<typeof TestCaseParams>;

/** What one case's conversation did (the playground reports it). */
export const CaseObservation = z.object({
  /** The test session (type "test") that recorded it. */
  sessionId: Id,
  /** Every step entered, in order, the first included. */
  steps: z.array(z.string()),
  /** The agent's replies, per turn (the greeting first). */
  replies: z.array(z.array(z.string())),
  ended: z.boolean(),
  endedAt: z.string().nullable(),
  structured: z.record(z.string(), JsonValue).nullable(),
  /** Each agent turn's figures, in order (the greeting first). */
  metrics: z.array(TurnMetrics).default([]),
});
export type CaseObservation = z.infer<typeof CaseObservation>;

/** One expectation that did not hold: which, what was expected, what happened. */
export const CaseFailure = z.object({
  expectation: z.enum(['steps', 'ends', 'endsAt', 'replyContains', 'structured']),
  expected: JsonValue,
  actual: JsonValue,
  message: z.string(),
});
export type CaseFailure = z.infer<typeof CaseFailure>;

export const CaseVerdict = z.enum(['queued', 'running', 'passed', 'failed', 'errored']);
export type CaseVerdict = z.infer<typeof CaseVerdict>;

export const CaseResult = z.object({
  caseId: Id,
  name: z.string(),
  verdict: CaseVerdict,
  /** How many times it was started (a case whose playground instance died is started once more). */
  attempts: z.number().int().nonnegative(),
  failures: z.array(CaseFailure),
  observed: CaseObservation.nullable(),
  /** Why it errored (it could not run to the end), when it did. */
  error: z.string().nullable(),
});
export type CaseResult = z.infer<typeof CaseResult>;

export const TestRunStatus = z.enum(['queued', 'running', 'passed', 'failed', 'errored']);
export type TestRunStatus = z.infer<typeof TestRunStatus>;

export const TestRun = z.object({
  id: Id,
  agentId: Id,
  version: z.number().int().positive(),
  status: TestRunStatus,
  counts: z.object({
    total: z.number().int(),
    queued: z.number().int(),
    running: z.number().int(),
    passed: z.number().int(),
    failed: z.number().int(),
    errored: z.number().int(),
  }),
  cases: z.array(CaseResult),
  createdAt: EpochMs,
  updatedAt: EpochMs,
  finishedAt: EpochMs.nullable(),
  /**
   * On a run that did not pass: the agent's newest passing run before it and what changed in the flow
   * since that run's version (null when it was this same version). Null otherwise, or with no passing run.
   */
  sinceLastPass: z
    .object({ runId: Id, version: z.number().int().positive(), changes: VersionDiff.nullable() })
    .nullable(),
  /** The p50 of each figure over this run's agent turns (ms), once cases have finished. */
  latency: z.partialRecord(z.enum(METRIC_NAMES), z.number().nonnegative()),
  /** How those p50s changed against the agent's newest passing run before this one; null without one. */
  latencyChange: z.object({ runId: Id, changes: z.array(LatencyChange) }).nullable(),
});
export type TestRun = z.infer<typeof TestRun>;

export const TestRunList = z.array(TestRun);
export type TestRunList = z.infer<typeof TestRunList>;

export const CreateTestRunBody = z.object({
  /** Default: the agent's latest version. */
  version: z.number().int().positive().optional(),
  /** Default: every case of the agent. */
  caseIds: z.array(Id).min(1).max(500).optional(),
  /** Keys for this run's model calls, as on a session start; never stored. */
  apiKeys: ApiKeys.optional(),
});
export type CreateTestRunBody = z.infer<typeof CreateTestRunBody>;

export const TestRunParams = z.object({ id: Id, runId: Id });
export type TestRunParams = z.infer<typeof TestRunParams>;

/** The deploy gate of one agent: when on, a deploy goes live only on a version whose last run passed. */
export const DeployGate = z.object({ enabled: z.boolean() });
export type DeployGate = z.infer<typeof DeployGate>;
