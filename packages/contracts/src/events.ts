import { z } from 'zod';
import { EpochMs, Id, subjectToken } from './common.js';
import { SessionUsage, TurnMetrics } from './metrics.js';
import { JsonValue, SessionType } from './sessions.js';
import { DtmfDigit } from './voice.js';

// ---- events ------------------------------------------------------------------------------------

/**
 * Every event of a session's stream, with the same envelope: a per-session monotonic `id` (1, 2, 3, … — the
 * SSE id a client resumes from with Last-Event-ID), the session and agent, and when it happened.
 */
const Envelope = {
  id: z.number().int().positive(),
  sessionId: Id,
  agentId: Id,
  at: EpochMs,
};

const StepId = z.string().max(200);
const ToolSource = z.enum(['mcp', 'flow']);

/** The event payloads, by type: what a producer emits (the publisher adds the envelope). */
export const SessionEventPayloads = {
  session_started: z.object({
    sessionType: SessionType,
    /** The agent version the session runs; null for a draft flow sent with the start. */
    version: z.number().int().positive().nullable(),
  }),
  session_ended: z.object({
    /** Why: `delete`, `idle`, `ended` (the flow said goodbye), `maximum session length`, `failed start`, … */
    reason: z.string().max(200),
    durationMs: z.number().int().nonnegative(),
  }),
  /**
   * Voice: the session's audio recording began; its `at` is the recording's zero (see `Recording.startedAt`).
   * No event when recording is off (`RECORDINGS=off`) or the start opted out (`record: false`).
   */
  recording_started: z.object({ sampleRate: z.number().int().positive() }),
  step_entered: z.object({ stepId: StepId, stepType: z.string().max(100) }),
  /** Voice: what the agent is doing now (LiveKit's agent state). */
  agent_state: z.object({ state: z.enum(['initializing', 'idle', 'listening', 'thinking', 'speaking']) }),
  /** What the user said: final turns, and a voice session's interim transcripts (`final: false`). */
  user_turn: z.object({ text: z.string(), final: z.boolean(), stepId: StepId }),
  /** Voice: a key the caller pressed (a phone's DTMF); its user turn `DTMF: <digit>` follows. */
  dtmf: z.object({ digit: DtmfDigit, stepId: StepId }),
  /** A piece of the agent's reply as the model streams it. */
  agent_reply_delta: z.object({ replyId: z.string().max(100), delta: z.string(), stepId: StepId }),
  /** The agent's whole reply, once it is done (after its deltas). */
  agent_reply: z.object({ replyId: z.string().max(100), text: z.string(), stepId: StepId }),
  tool_called: z.object({
    callId: z.string().max(200),
    name: z.string().max(200),
    source: ToolSource,
    arguments: JsonValue,
    stepId: StepId,
  }),
  tool_result: z.object({
    callId: z.string().max(200),
    name: z.string().max(200),
    source: ToolSource,
    /** The tool's answer as the model saw it (absent on error). */
    result: z.string().optional(),
    error: z.string().optional(),
    durationMs: z.number().nonnegative(),
    stepId: StepId,
  }),
  branch_decided: z.object({ stepId: StepId, exit: z.string().max(200), attempt: z.number().int() }),
  /** A transfer step ran: to another agent (`targetAgentId`), or a phone call to a number (`targetNumber`). */
  transfer: z.object({
    targetAgentId: Id.optional(),
    targetNumber: z.string().max(20).optional(),
    ok: z.boolean(),
    /** Why it failed (`missing`, `archived`, `invalid`, `unavailable`, `error`). */
    reason: z.string().max(100).optional(),
  }),
  post_processing: z.object({
    stepId: StepId,
    kind: z.enum(['structured_output', 'webhook']),
    ok: z.boolean(),
    /** The structured output extracted (structured_output). */
    output: z.record(z.string(), JsonValue).optional(),
    /** The webhook's HTTP status, when it answered. */
    status: z.number().int().optional(),
    error: z.string().max(1000).optional(),
  }),
  /** The figures of the agent turn that just finished (also stored on its transcript message). */
  turn_metrics: z.object({ stepId: StepId, metrics: TurnMetrics }),
  /** Usage so far, per provider and model (voice: as LiveKit's usage collector updates it). */
  usage: z.object({ usage: SessionUsage }),
  /**
   * An error in the session: one the model saw (a tool or model error), or the stream's own (`SESSION_LOST`:
   * the instance running the session is gone; sent without an id, it is not part of the stored stream).
   */
  error: z.object({
    code: z.string().max(100),
    message: z.string().max(2000),
    stepId: StepId.optional(),
    /** The flow node whose model failed (a model error), e.g. the LLM node's id. */
    nodeId: z.string().max(200).optional(),
    /** What kind of failure a model error was (see `TurnFailureKind`). */
    kind: z.string().max(50).optional(),
  }),
} as const;

export type SessionEventType = keyof typeof SessionEventPayloads;
export const SESSION_EVENT_TYPES = Object.keys(SessionEventPayloads) as SessionEventType[];

/**
 * The events a public call's socket sends its caller (docs/api.md › Starting a public call): what a talk page
 * shows — the agent's state, the transcript as it happens, the start, the end, an error — and none of what is
 * the builder's (tool calls with their arguments and results, branch decisions, post-processing, steps,
 * figures, usage), which a flow may fill with its back end's data. The builder's own streams send every event.
 */
export const PUBLIC_CALL_EVENT_TYPES: ReadonlySet<SessionEventType> = new Set<SessionEventType>([
  'session_started',
  'session_ended',
  'agent_state',
  'user_turn',
  'dtmf',
  'agent_reply_delta',
  'agent_reply',
  'error',
]);

const eventOf = <T extends SessionEventType>(type: T) =>
  SessionEventPayloads[type].extend({ ...Envelope, type: z.literal(type) });

export const SessionEvent = z.discriminatedUnion('type', [
  eventOf('session_started'),
  eventOf('session_ended'),
  eventOf('recording_started'),
  eventOf('step_entered'),
  eventOf('agent_state'),
  eventOf('user_turn'),
  eventOf('dtmf'),
  eventOf('agent_reply_delta'),
  eventOf('agent_reply'),
  eventOf('tool_called'),
  eventOf('tool_result'),
  eventOf('branch_decided'),
  eventOf('transfer'),
  eventOf('post_processing'),
  eventOf('turn_metrics'),
  eventOf('usage'),
  eventOf('error'),
]);
export type SessionEvent = z.infer<typeof SessionEvent>;

/** What a producer hands the publisher: a payload with its type, no envelope. */
export type SessionEventInput = {
  [T in SessionEventType]: { type: T } & z.infer<(typeof SessionEventPayloads)[T]>;
}[SessionEventType];

/** The JetStream stream that keeps every session's events, and the subject of one session's events. */
export const EVENTS_STREAM = 'SESSION_EVENTS';
export const EVENTS_SUBJECT_PREFIX = 'events';
export const eventsSubject = (agentId: string, sessionId: string) =>
  `${EVENTS_SUBJECT_PREFIX}.${subjectToken(agentId, 'an agent id')}.${subjectToken(sessionId, 'a session id')}`;

/** A session's owner answers here (no queue group) while it runs the session: how a stream tells a lost owner. */
export const liveSubject = (sessionId: string) =>
  `playground.live.${subjectToken(sessionId, 'a session id')}`;

/** Last-Event-ID / `lastEventId`: the id of the last event a client has; 0 = from the start. */
export const LastEventId = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,14})$/, 'must be a non-negative integer event id')
  .transform(Number);

export const SessionEventsQuery = z.object({
  /** Where to resume when the client cannot send a Last-Event-ID header (the header wins). */
  lastEventId: z.string().optional(),
  /** A ticket from POST /api/tickets, for a browser's EventSource when API tokens are on. */
  ticket: z.string().optional(),
});
export type SessionEventsQuery = z.infer<typeof SessionEventsQuery>;
