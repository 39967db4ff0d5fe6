import { z } from 'zod';
import { CallAnalysis } from './analysis.js';
import { EpochMs, Id } from './common.js';
import { DeployedVersion } from './deploys.js';
import { FigureStats, SessionUsage } from './metrics.js';
import { Recording, SessionMessage } from './sessions.js';
import { VoiceAudioFormat } from './voice.js';

/**
 * Calls (issue 45): production conversations with a live deploy, kept apart from test sessions. A call is
 * hosted on a playground instance as a voice session whose `sessionId` is the `callId`; the sessions service
 * stores it (its own keys) with the deploy and version it ran.
 */

export const CallChannel = z.enum(['web', 'phone']);
export type CallChannel = z.infer<typeof CallChannel>;

/**
 * Who and what ended a call (one enum, documented in docs/api.md › Calls):
 * - `caller_hung_up`: the caller closed the socket, sent `end`, or hung up the phone;
 * - `agent_ended`: the flow reached an end step;
 * - `transferred`: the flow handed the call over (`transferredTo`);
 * - `max_duration`: the deploy's `maxCallDurationMs` (after its `endCallMessage`);
 * - `silence_timeout`: nobody spoke for the deploy's `silenceTimeoutMs`;
 * - `busy`: refused at a cap (never connected): `endedDetail.kind` names the cap;
 * - `provider_error`: a model provider failed the call (`endedDetail`: provider and kind);
 * - `instance_lost`: the playground instance hosting it went away;
 * - `overloaded`: the instance hosting it fell too far behind real time to hear the caller
 *   (`SESSION_MAX_BEHIND_MS`) and ended it rather than leave the caller unheard;
 * - `drained`: the instance hosting it shut down and the call could not be moved;
 * - `gateway_lost`: the edge relaying its audio went away;
 * - `no_connect`: admitted, but the caller never opened the audio socket in time.
 */
export const EndedReason = z.enum([
  'caller_hung_up',
  'agent_ended',
  'transferred',
  'max_duration',
  'silence_timeout',
  'busy',
  'provider_error',
  'instance_lost',
  'overloaded',
  'drained',
  'gateway_lost',
  'no_connect',
]);
export type EndedReason = z.infer<typeof EndedReason>;

/**
 * Why an edge closed a caller's media stream (a `caller_hung_up` call's `endedDetail.kind`): its audio came
 * faster than real time beyond the burst, or it sent what is not a message of its protocol.
 */
export const MediaRefusalKind = z.enum(['media_too_fast', 'bad_message']);
export type MediaRefusalKind = z.infer<typeof MediaRefusalKind>;

/** The caps a `busy` call met (its `endedDetail.kind`). */
export const BusyKind = z.enum(['max_concurrent_calls', 'daily_call_cap', 'per_address']);
export type BusyKind = z.infer<typeof BusyKind>;

/**
 * More about an end: for `provider_error` the provider (`openai`, `deepgram`, …) and the kind (a
 * `TurnFailureKind`: `auth`, `timeout`, …); for `busy` the cap (`BusyKind`); for a `caller_hung_up` whose
 * stream the edge closed, why (`MediaRefusalKind`).
 */
export const EndedDetail = z.object({
  provider: z.string().max(100).optional(),
  kind: z.string().max(100),
});
export type EndedDetail = z.infer<typeof EndedDetail>;

/**
 * Who called, never more than needed: a web caller's address as a hash (never the raw address), a phone
 * caller's number masked to its last 4 digits (`…1234`) and the number called.
 */
export const CallCaller = z.object({
  addressHash: z.string().max(128).optional(),
  from: z.string().max(32).optional(),
  to: z.string().max(32).optional(),
});
export type CallCaller = z.infer<typeof CallCaller>;

export const CallStatus = z.enum(['active', 'ended']);
export type CallStatus = z.infer<typeof CallStatus>;

/** A call's latency figures over its turns that called a model (ms), Retell's `latency` in our names. */
export const CallFigures = z.object({
  turns: z.number().int().nonnegative(),
  responseMs: FigureStats.optional(),
  e2eLatencyMs: FigureStats.optional(),
  transcriptionDelayMs: FigureStats.optional(),
  llmTtftMs: FigureStats.optional(),
  ttsTtfbMs: FigureStats.optional(),
});
export type CallFigures = z.infer<typeof CallFigures>;

export const CallSummary = z.object({
  id: Id,
  agentId: Id,
  deployId: Id,
  deployNumber: z.number().int().positive(),
  /** The agent version the call ran (its deploy's pin when it started). */
  version: z.number().int().positive(),
  channel: CallChannel,
  caller: CallCaller,
  status: CallStatus,
  startedAt: EpochMs,
  /** null while the call goes on. */
  endedAt: EpochMs.nullable(),
  durationMs: z.number().int().nonnegative().nullable(),
  endedReason: EndedReason.nullable(),
  endedDetail: EndedDetail.nullable(),
  /** Where a `transferred` call went (a number or an address the flow named). */
  transferredTo: z.string().max(200).nullable(),
  /** What the call used, per provider and model (filled when it ends). */
  usage: SessionUsage,
  figures: CallFigures.nullable(),
  /** The call's stereo recording, once stored; null otherwise (refused, not recorded, or not yet). */
  recording: Recording.nullable(),
  /** Its post-call analysis (issue 47); null until analysed, or when analysis is off. */
  analysis: CallAnalysis.nullable().default(null),
});
export type CallSummary = z.infer<typeof CallSummary>;

/** One call with its transcript, shaped as test-session messages (step ids, per-turn figures). */
export const Call = CallSummary.extend({ messages: z.array(SessionMessage) });
export type Call = z.infer<typeof Call>;

export const CallList = z.object({
  /** Newest first. */
  calls: z.array(CallSummary),
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: z.string().nullable(),
});
export type CallList = z.infer<typeof CallList>;

export const CallParams = z.object({ id: Id, callId: Id });
export type CallParams = z.infer<typeof CallParams>;

const intString = (what: string) => z.string().regex(/^(0|[1-9][0-9]{0,15})$/, `must be ${what}`);

/** `GET /api/agents/:id/calls` filters (query strings). `from`/`to`: a time range on `startedAt` (ms). */
export const CallListQuery = z
  .object({
    deployId: Id.optional(),
    channel: CallChannel.optional(),
    endedReason: EndedReason.optional(),
    /** The analysis' `success` (calls not analysed match neither). */
    success: z.enum(['true', 'false']).optional(),
    /** `<criterion name>:<passed|failed|unknown>`: calls whose analysis gave that criterion that verdict. */
    criterion: z
      .string()
      .regex(/^[^:]{1,200}:(passed|failed|unknown)$/, 'must be <criterion name>:<passed|failed|unknown>')
      .optional(),
    from: intString('epoch milliseconds').optional(),
    to: intString('epoch milliseconds').optional(),
    cursor: z.string().max(200).optional(),
    limit: z
      .string()
      .regex(/^([1-9]|[1-9][0-9]|100)$/, 'must be 1–100')
      .optional(),
  })
  .strict();
export type CallListQuery = z.infer<typeof CallListQuery>;

export const ListCallsRequest = z.object({
  agentId: Id,
  deployId: Id.optional(),
  channel: CallChannel.optional(),
  endedReason: EndedReason.optional(),
  success: z.boolean().optional(),
  criterion: z
    .object({ name: z.string().min(1).max(200), verdict: z.enum(['passed', 'failed', 'unknown']) })
    .optional(),
  from: EpochMs.optional(),
  to: EpochMs.optional(),
  cursor: z.string().max(200).optional(),
  limit: z.number().int().min(1).max(100).default(50),
});
export type ListCallsRequest = z.infer<typeof ListCallsRequest>;

export const CallRef = z.object({ agentId: Id, callId: Id });
export type CallRef = z.infer<typeof CallRef>;

/** Per agent: how long its calls are kept, and whether its public page answers without a key. */
export const CallSettings = z
  .object({
    /** Calls (and their recordings) older than this are deleted; null: the operator's default. */
    callRetentionDays: z.number().int().min(1).max(3650).nullable(),
    /** false: `GET /live/:subdomain` and key-less calls from it are refused (the widget's keys still work). */
    livePage: z.boolean(),
  })
  .strict();
export type CallSettings = z.infer<typeof CallSettings>;
export const DEFAULT_CALL_SETTINGS: CallSettings = { callRetentionDays: null, livePage: true };

/** `sessions.live.page`: the gateway asks before it serves a subdomain's talk page. */
export const LivePageRequest = z.object({ subdomain: z.string().min(1).max(100) });
export type LivePageRequest = z.infer<typeof LivePageRequest>;

/** false: the subdomain's agent turned its page off (`livePage: false`); true otherwise (nothing live included). */
export const LivePageAnswer = z.object({ page: z.boolean() });
export type LivePageAnswer = z.infer<typeof LivePageAnswer>;

// ---- starting a call (edges → playground → sessions) ---------------------------------------------------

/**
 * `playground.calls.start` (queue group): an edge starts a call of a live deploy. `transport: 'socket'`: the
 * gateway's audio socket attaches (as a voice session's); `'bus'`: the edge relays PCM on
 * `voice.<callId>.in|out` itself (telephony). The deploy's caps are checked by the sessions service.
 */
/** Who calls which deploy: what an edge says of a call it starts, and the playground passes on to admit it. */
const CallAsk = z.object({
  /** The live deploy to call, by its subdomain (web) or its agent (phone numbers name an agent). */
  subdomain: z.string().min(1).max(100).optional(),
  agentId: Id.optional(),
  channel: CallChannel,
  caller: CallCaller,
  /** The caller's address as the per-address cap counts it (IPv4, IPv6 /64), hashed: never the raw one. */
  addressKey: z.string().max(128).optional(),
  /** The publishable key the edge verified (its id), if any. */
  keyId: Id.optional(),
  /**
   * Who the caller is, keyed (an HMAC, never the raw address or number): what keeps a caller on one side of a
   * canary (decision 0035). Absent: the address key (web), else each call is drawn afresh.
   */
  callerKey: z.string().max(128).optional(),
});

export const StartCallRequest = CallAsk.extend({
  transport: z.enum(['socket', 'bus']),
  audio: VoiceAudioFormat.default({ sampleRate: 16000, frameMs: 20 }),
}).refine((r) => r.subdomain !== undefined || r.agentId !== undefined, {
  message: 'a call names its deploy: subdomain or agentId',
});
export type StartCallRequest = z.infer<typeof StartCallRequest>;

export const CallStarted = z.object({
  callId: Id,
  agentId: Id,
  deployId: Id,
  deployNumber: z.number().int().positive(),
  version: z.number().int().positive(),
  audio: z.object({
    sampleRate: z.number().int(),
    frameMs: z.number().int(),
    frameBytes: z.number().int(),
  }),
  /** The call ends (`no_connect`) when no audio arrives / no socket attaches within this many ms. */
  connectWithinMs: z.number().int(),
});
export type CallStarted = z.infer<typeof CallStarted>;

/**
 * `sessions.calls.admit`: the playground asks before it hosts a call. A refusal at a cap is recorded as a call
 * (`busy`) and answered as CAPACITY_EXHAUSTED (a deploy's caps) or RATE_LIMITED (the address's), with
 * `retryAfterSeconds`.
 */
export const AdmitCallRequest = CallAsk.extend({
  /** The playground instance that will host it (for `instance_lost`). */
  instanceId: z.string().max(100),
});
export type AdmitCallRequest = z.infer<typeof AdmitCallRequest>;

/** An AES-256-GCM sealed blob (credentials.ts); only the playground opens it. */
export const SealedBlob = z.object({
  /** Which operator key sealed it (a short fingerprint), so rotation finds the key to open it. */
  keyId: z.string().max(64),
  iv: z.string().max(64),
  tag: z.string().max(64),
  data: z.string().max(64_000),
});
export type SealedBlob = z.infer<typeof SealedBlob>;

export const AdmittedCall = DeployedVersion.extend({
  callId: Id,
  /** The agent's stored provider keys, sealed; null when none are stored. */
  credentials: SealedBlob.nullable(),
});
export type AdmittedCall = z.infer<typeof AdmittedCall>;

/** `sessions.calls.append`: one transcript message of a call (as a test session's). */
export const AppendCallMessageRequest = CallRef.extend({ message: SessionMessage });
export type AppendCallMessageRequest = z.infer<typeof AppendCallMessageRequest>;

/** `sessions.calls.end`: the host reports the end (asking again is safe: the first end stands). */
export const EndCallRequest = CallRef.extend({
  endedAt: EpochMs,
  endedReason: EndedReason,
  endedDetail: EndedDetail.optional(),
  transferredTo: z.string().max(200).optional(),
  usage: SessionUsage.default([]),
});
export type EndCallRequest = z.infer<typeof EndCallRequest>;

/** `sessions.calls.recording`: the host stored the call's recording (object `recordingObject(agentId, callId)`). */
export const CallRecordingRequest = CallRef.extend({ recording: Recording });
export type CallRecordingRequest = z.infer<typeof CallRecordingRequest>;
