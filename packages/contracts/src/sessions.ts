import { z } from 'zod';
import { VersionDiff } from './agents.js';
import { ApiKeys, EpochMs, Id, subjectToken } from './common.js';
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

/**
 * A voice session's recording: one stereo Ogg Opus file (left: the user as heard by the agent, right: the agent
 * as played), served at `…/test-sessions/:sessionId/recording`. `startedAt` is its zero on the wall clock (the
 * `recording_started` event's `at`): an event at `at` is heard at `at - startedAt` ms into the file.
 */
export const Recording = z.object({
  durationMs: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  startedAt: EpochMs,
});
export type Recording = z.infer<typeof Recording>;

/** The NATS Object Store bucket of the recordings, and one session's object in it. */
export const RECORDINGS_BUCKET = 'recordings';
export const recordingObject = (agentId: string, sessionId: string) =>
  `${subjectToken(agentId, 'an agent id')}/${subjectToken(sessionId, 'a session id')}.ogg`;
/**
 * The id a recording's chunks are stored under in the bucket (`$O.recordings.C.<id>`, the object's `nuid`): known
 * from the session alone, so the chunks a killed instance wrote while recording can be found and named as the
 * object by another process (decision 35). Two subject tokens: never one of the Object Store's own 22-character ids.
 */
export const recordingChunksId = (agentId: string, sessionId: string) =>
  `${subjectToken(agentId, 'an agent id')}.${subjectToken(sessionId, 'a session id')}`;
/** Headers on each chunk of a recording being made: the recording's zero, and its length up to that chunk's end. */
export const RECORDING_STARTED_AT_HEADER = 'Vab-Recording-Started-At';
export const RECORDING_DURATION_HEADER = 'Vab-Recording-Duration-Ms';
/**
 * Header on each chunk of a recording being made: its number in the recording, from 0. A write whose answer was
 * lost is looked up by it (was the chunk stored?) before it is sent again, so no chunk is stored twice.
 */
export const RECORDING_CHUNK_HEADER = 'Vab-Recording-Chunk';
/** The Object Store's own stream behind the recordings bucket. */
export const RECORDINGS_STREAM = `OBJ_${RECORDINGS_BUCKET}`;
/** The Object Store's default chunk size: a recording's chunks are at most this long. */
export const RECORDING_MAX_CHUNK = 128 * 1024;
/**
 * The subject a recording's chunks are stored on (the Object Store's chunk subject of its `nuid`). The bucket's
 * own subjects, not the bus's (`…Subject`, each in docs/architecture.md's subject list): hence `…SubjectOf`.
 */
export const recordingChunksSubjectOf = (nuid: string) => `$O.${RECORDINGS_BUCKET}.C.${nuid}`;
/** The subject a recording's meta is stored on (the Object Store's: its name in padded base64url). */
export const recordingMetaSubjectOf = (agentId: string, sessionId: string) =>
  `$O.${RECORDINGS_BUCKET}.M.${padded(Buffer.from(recordingObject(agentId, sessionId)).toString('base64url'))}`;

/**
 * A recording's meta in the bucket: what makes its chunks an object, exactly as the Object Store's `put` writes it
 * (ADR-20 of nats-io/nats-architecture-and-design, @nats-io/obj 3.4.0), so its own client reads ours and we read
 * its. Written by the playground when a recording ends and by the sessions service for one a killed instance left
 * (decision 35), read by the gateway that serves it; each checks it with this schema. A deleted object's meta
 * stays, `deleted: true` with no size, chunks or digest.
 */
export const RecordingMeta = z.object({
  /** `recordingObject(agentId, sessionId)`. */
  name: z.string().min(1),
  options: z.object({ max_chunk_size: z.number().int().positive() }).partial().optional(),
  /** `{ agentId, sessionId }` on ours. */
  metadata: z.record(z.string(), z.string()).optional(),
  bucket: z.literal(RECORDINGS_BUCKET),
  /** The id its chunks are stored under: `recordingChunksId(agentId, sessionId)`. */
  nuid: z.string().min(1),
  size: z.number().int().nonnegative(),
  chunks: z.number().int().nonnegative(),
  mtime: z.string(),
  /** `SHA-256=` and the digest of the chunks' bytes in padded base64url (`recordingDigest`); empty once deleted. */
  digest: z.union([z.string().regex(/^SHA-256=[A-Za-z0-9_-]{43}=$/), z.literal('')]),
  deleted: z.boolean().optional(),
});
export type RecordingMeta = z.infer<typeof RecordingMeta>;

/** An object's digest as the Object Store writes it, from the SHA-256 of its bytes. */
export const recordingDigest = (sha256: Uint8Array) =>
  `SHA-256=${padded(Buffer.from(sha256).toString('base64url'))}`;

/**
 * The meta that makes a recording's stored chunks (`size` bytes in `chunks` chunks, `sha256` their digest) the
 * session's object; checked before it is written.
 */
export function recordingMeta(o: {
  agentId: string;
  sessionId: string;
  size: number;
  chunks: number;
  sha256: Uint8Array;
}): RecordingMeta {
  return RecordingMeta.parse({
    name: recordingObject(o.agentId, o.sessionId),
    options: { max_chunk_size: RECORDING_MAX_CHUNK },
    metadata: { agentId: o.agentId, sessionId: o.sessionId },
    bucket: RECORDINGS_BUCKET,
    nuid: recordingChunksId(o.agentId, o.sessionId),
    size: o.size,
    chunks: o.chunks,
    mtime: new Date().toISOString(),
    digest: recordingDigest(o.sha256),
    deleted: false,
  });
}

/** The Object Store's names and digests are base64url with its padding. */
function padded(b64url: string): string {
  return b64url + '='.repeat((4 - (b64url.length % 4)) % 4);
}

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
  /** The session's audio, once stored (a voice session that was recorded); null otherwise. */
  recording: Recording.nullable(),
  /**
   * Why the session ended when its own instance did not end it: `instance_lost`, closed by the owner sweep
   * because the playground instance running it was gone (killed, its machine lost). null otherwise.
   */
  endedReason: z.enum(['instance_lost']).nullable(),
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
  /** Turns whose answer carried an `error` (a model of the flow failed): failures in the stats. */
  failedTurns: z.number().int().nonnegative().optional(),
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
  /**
   * Voice (`simulation.voice`) only, each bounding a figure measured from the call's audio (`observed.voice`):
   * every caller turn answered within this (end of the caller's speech → the agent's first audio).
   */
  maxResponseMs: z.number().int().min(0).max(60_000).optional(),
  /** Voice: the agent starts talking over the caller at most this many times (0: never interrupts). */
  maxAgentInterruptions: z.number().int().min(0).max(100).optional(),
  /** Voice: no silence the agent leaves the caller in lasts longer than this. */
  maxSilenceMs: z.number().int().min(100).max(60_000).optional(),
  /** Voice: after every barge-in of the caller, the agent stops talking within this. */
  maxBargeInStopMs: z.number().int().min(0).max(30_000).optional(),
});
export type CaseExpectation = z.infer<typeof CaseExpectation>;

/** The expectations that bound a voice attempt's audio figures. */
export const VOICE_BOUNDS = [
  'maxResponseMs',
  'maxAgentInterruptions',
  'maxSilenceMs',
  'maxBargeInStopMs',
] as const satisfies readonly (keyof CaseExpectation)[];

const CaseName = z.string().trim().min(1).max(200);
/** A model temperature for this case only (0 makes a real model as repeatable as it gets). */
const Temperature = z.number().min(0).max(2);

/**
 * A model a simulated case uses beside the flow's (the simulated caller, the judge, `generate`): any provider
 * the readiness check runs for text, under the same key rule and egress policy as a flow's model node.
 * Absent: the flow's own agent model.
 */
export const CaseModel = z
  .object({
    provider: z.string().trim().min(1).max(100),
    model: z.string().trim().min(1).max(200).optional(),
    /** An OpenAI-compatible endpoint instead of the provider's own (the egress policy applies). */
    baseURL: z.string().trim().min(1).max(2000).optional(),
    temperature: Temperature.optional(),
  })
  .strict();
export type CaseModel = z.infer<typeof CaseModel>;

/** The speech providers this server runs as a simulated caller's voice (TTS) and ear (STT). */
export const CALLER_TTS_PROVIDERS = ['openai', 'elevenlabs', 'deepgram'] as const;
export const CALLER_STT_PROVIDERS = ['openai', 'deepgram'] as const;

const ModelText = z.string().trim().min(1).max(200);
const SpeechURL = z.string().trim().min(1).max(2000);

/**
 * The simulated caller's voice: a TTS chosen as a flow's `tts` node chooses one (same params, the same key
 * rule and egress policy for `baseURL`). Absent: the flow's own TTS.
 */
export const CallerVoice = z
  .object({
    provider: z.enum(CALLER_TTS_PROVIDERS),
    model: ModelText.optional(),
    voiceId: ModelText.optional(),
    baseURL: SpeechURL.optional(),
  })
  .strict();
export type CallerVoice = z.infer<typeof CallerVoice>;

/** What the simulated caller hears the agent through: an STT chosen as a flow's `stt` node chooses one. */
export const CallerEar = z
  .object({
    provider: z.enum(CALLER_STT_PROVIDERS),
    model: ModelText.optional(),
    language: z.string().trim().min(1).max(35).optional(),
    baseURL: SpeechURL.optional(),
  })
  .strict();
export type CallerEar = z.infer<typeof CallerEar>;

/** The share of the caller's turns a behaviour happens on (drawn from the attempt's seed). */
const Chance = z.number().min(0).max(1).default(1);

/**
 * How the simulated caller talks, each behaviour optional and drawn from the attempt's seed (the same seed
 * behaves the same way again).
 */
export const CallerBehaviour = z
  .object({
    /** A pause of `ms` inside a sentence: the caller's line is cut at its middle word gap. */
    midSentencePause: z
      .object({ ms: z.number().int().min(100).max(10_000), chance: Chance })
      .strict()
      .optional(),
    /** The caller starts its next line `afterMs` after the agent starts speaking, talking over it. */
    bargeIn: z
      .object({ afterMs: z.number().int().min(0).max(30_000), chance: Chance })
      .strict()
      .optional(),
    /** Background noise on the caller's line, at this signal-to-noise ratio (dB, against its speech). */
    noise: z
      .object({
        snrDb: z.number().min(-10).max(60),
        kind: z.enum(['white', 'pink', 'brown']).default('pink'),
      })
      .strict()
      .optional(),
    /** A silence of `ms` before the caller answers. */
    silenceBeforeAnswer: z
      .object({ ms: z.number().int().min(0).max(30_000), chance: Chance })
      .strict()
      .optional(),
    /** Speaking rate (1: the voice's own), passed to the caller's TTS as its speed. */
    rate: z.number().min(0.5).max(2).optional(),
  })
  .strict();
export type CallerBehaviour = z.infer<typeof CallerBehaviour>;

/**
 * Voice mode of a simulated case: each attempt is a spoken conversation, the caller's lines spoken by `tts`
 * and streamed in real time into the flow's voice pipeline, the agent heard through `stt`.
 */
export const SimulationVoice = z
  .object({
    tts: CallerVoice.optional(),
    stt: CallerEar.optional(),
    behaviour: CallerBehaviour.default({}),
  })
  .strict();
export type SimulationVoice = z.infer<typeof SimulationVoice>;

/** A model plays the caller: who they are, what they want, how many turns it may take; `voice`: by voice. */
export const Simulation = z
  .object({
    persona: z.string().trim().min(1).max(4000),
    goal: z.string().trim().min(1).max(4000),
    maxTurns: z.number().int().min(1).max(30),
    model: CaseModel.optional(),
    voice: SimulationVoice.optional(),
  })
  .strict();
export type Simulation = z.infer<typeof Simulation>;

/** What a mocked tool answers: a result (text as is, anything else as JSON), or an error the model sees. */
export const ToolMock = z
  .object({ result: JsonValue.optional(), error: z.string().min(1).max(2000).optional() })
  .strict()
  .refine((m) => (m.result !== undefined) !== (m.error !== undefined), {
    message: 'send either result or error',
  });
export type ToolMock = z.infer<typeof ToolMock>;

/** What a mocked webhook answered (its body is never read, as with a real one). */
export const WebhookMock = z.object({ status: z.number().int().min(100).max(599).default(200) }).strict();
export type WebhookMock = z.infer<typeof WebhookMock>;

/**
 * Results a case fixes, so its conversations never reach the real systems: MCP tools by the tool's name (as
 * selected on the flow's MCP node), webhooks by their node id. A call without a mock behaves as in any session.
 */
export const CaseMocks = z
  .object({
    tools: z.record(z.string().min(1).max(200), ToolMock).optional(),
    webhooks: z.record(z.string().min(1).max(200), WebhookMock).optional(),
  })
  .strict()
  .refine((m) => Object.keys(m.tools ?? {}).length + Object.keys(m.webhooks ?? {}).length <= 100, {
    message: 'at most 100 mocks',
  });
export type CaseMocks = z.infer<typeof CaseMocks>;

/** One thing a judge model decides over the transcript: pass or fail, with a reason citing the turn. */
export const Criterion = z
  .object({
    name: z.string().trim().min(1).max(200),
    description: z.string().trim().min(1).max(4000),
  })
  .strict();
export type Criterion = z.infer<typeof Criterion>;

const Criteria = z.array(Criterion).max(20);
const Repeat = z.number().int().min(1).max(20);
const MinPassRate = z.number().min(0).max(1);

export const TestCase = z.object({
  id: Id,
  agentId: Id,
  name: z.string(),
  /** The scripted user turns; empty for a simulated case. */
  turns: z.array(z.string()),
  expect: CaseExpectation,
  temperature: Temperature.nullable(),
  /** The recorded test session this case was made from, when it was. */
  fromSession: Id.nullable(),
  /** A model plays the caller instead of scripted turns; null for a scripted case. */
  simulation: Simulation.nullable(),
  mocks: CaseMocks,
  /** Decided by a judge model once the expectations hold. */
  criteria: z.array(Criterion),
  /** The judge's model; null: the flow's agent model. */
  judgeModel: CaseModel.nullable(),
  /** How many times each run runs it (attempts in parallel). */
  repeat: Repeat,
  /** The share of attempts that must pass for the case to pass. */
  minPassRate: MinPassRate,
  createdAt: EpochMs,
  updatedAt: EpochMs,
});
export type TestCase = z.infer<typeof TestCase>;

export const TestCaseList = z.array(TestCase);
export type TestCaseList = z.infer<typeof TestCaseList>;

/**
 * The turns as a body may carry them: a front end that sends a simulated case back whole sends `turns: []`
 * (what the case holds), which means "no turns".
 */
const BodyTurns = z.array(z.string().min(1).max(4000)).max(50);

/**
 * A case written by hand with scripted `turns`, a simulated one (`simulation`: a model plays the caller), or
 * one made from a recorded test session (`fromSession`: its user turns become the turns and its observed step
 * path the expected steps). Exactly one of the three; the others absent, null or (`turns`) empty, as a case
 * read back shows them.
 */
export const CreateTestCaseBody = z
  .object({
    name: CaseName.optional(),
    turns: BodyTurns.optional(),
    simulation: Simulation.nullish(),
    fromSession: Id.nullish(),
    expect: CaseExpectation.optional(),
    temperature: Temperature.nullish(),
    mocks: CaseMocks.optional(),
    criteria: Criteria.optional(),
    judgeModel: CaseModel.nullish(),
    repeat: Repeat.optional(),
    minPassRate: MinPassRate.optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    const given = {
      turns: b.turns !== undefined && b.turns.length > 0,
      simulation: b.simulation != null,
      fromSession: b.fromSession != null,
    };
    const kinds = (['turns', 'simulation', 'fromSession'] as const).filter((k) => given[k]);
    if (kinds.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['turns'],
        message: 'send turns (scripted, 1–50), simulation (a simulated caller) or fromSession (a replay)',
      });
    }
    if (kinds.length > 1) {
      ctx.addIssue({ code: 'custom', path: [kinds[1]!], message: `not with ${kinds[0]}` });
    }
    if (!given.fromSession && b.name === undefined) {
      ctx.addIssue({ code: 'custom', path: ['name'], message: 'required' });
    }
    if (given.fromSession && b.expect !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['expect'], message: 'a replay expects the path it recorded' });
    }
    const voiceBound = VOICE_BOUNDS.find((k) => b.expect?.[k] !== undefined);
    if (voiceBound && !b.simulation?.voice) {
      ctx.addIssue({
        code: 'custom',
        path: ['expect', voiceBound],
        message: 'bounds a figure of a voice attempt: the case needs simulation.voice',
      });
    }
  });
export type CreateTestCaseBody = z.infer<typeof CreateTestCaseBody>;

/**
 * The fields sent. A case is scripted or simulated: `simulation` makes it simulated (its turns go), non-empty
 * `turns` make it scripted (its simulation goes); sent back whole (`turns: []` beside a simulation, or
 * `simulation: null` beside turns) it stays what it is.
 */
export const UpdateTestCaseBody = z
  .object({
    name: CaseName.optional(),
    turns: BodyTurns.optional(),
    simulation: Simulation.nullable().optional(),
    expect: CaseExpectation.optional(),
    temperature: Temperature.nullable().optional(),
    mocks: CaseMocks.optional(),
    criteria: Criteria.optional(),
    judgeModel: CaseModel.nullable().optional(),
    repeat: Repeat.optional(),
    minPassRate: MinPassRate.optional(),
  })
  .superRefine((b, ctx) => {
    const turns = b.turns !== undefined && b.turns.length > 0;
    if (turns && b.simulation) {
      ctx.addIssue({ code: 'custom', path: ['simulation'], message: 'not with turns' });
    }
    if (b.turns !== undefined && !turns && !b.simulation) {
      ctx.addIssue({ code: 'custom', path: ['turns'], message: 'at least one turn (or send a simulation)' });
    }
    if (b.simulation === null && !turns) {
      ctx.addIssue({
        code: 'custom',
        path: ['turns'],
        message: 'a case without a simulation needs its turns',
      });
    }
  });
export type UpdateTestCaseBody = z.infer<typeof UpdateTestCaseBody>;

/** Ask a model to propose simulated cases from the agent's latest flow; nothing is stored. */
export const GenerateTestCasesBody = z
  .object({
    count: z.number().int().min(1).max(20),
    /** What to concentrate on (e.g. "refund requests from angry callers"). */
    focus: z.string().trim().min(1).max(2000).optional(),
    /** Default: the flow's agent model. */
    model: CaseModel.optional(),
    /** Keys for the model call, as on a session start; never stored. */
    apiKeys: ApiKeys.optional(),
  })
  .strict();
export type GenerateTestCasesBody = z.infer<typeof GenerateTestCasesBody>;

/** A proposed simulated case: a body `POST /api/agents/:id/test-cases` accepts as it is. */
export const GeneratedTestCase = z.object({
  name: CaseName,
  simulation: Simulation,
  criteria: Criteria,
});
export type GeneratedTestCase = z.infer<typeof GeneratedTestCase>;

export const GeneratedTestCases = z.object({ cases: z.array(GeneratedTestCase) });
export type GeneratedTestCases = z.infer<typeof GeneratedTestCases>;

export const TestCaseParams = z.object({ id: Id, caseId: Id });
export type TestCaseParams = z.infer<typeof TestCaseParams>;

/** Usage of one attempt, or a whole run, by who used it: the flow's agent, the simulated caller, the judge. */
export const UsageByRole = z.object({
  agent: SessionUsage,
  simulator: SessionUsage,
  judge: SessionUsage,
});
export type UsageByRole = z.infer<typeof UsageByRole>;

/** A judge's decision on one criterion; `turn` is the 1-based turn of the transcript its reason cites. */
export const Judgement = z.object({
  criterion: z.string(),
  passed: z.boolean(),
  reason: z.string(),
  turn: z.number().int().nonnegative().nullable(),
});
export type Judgement = z.infer<typeof Judgement>;

/** Why a conversation stopped: the flow ended it, the simulated caller did, or the turns ran out. */
export const AttemptEnd = z.enum(['flow', 'goal_reached', 'gave_up', 'max_turns', 'turns']);
export type AttemptEnd = z.infer<typeof AttemptEnd>;

/**
 * An attempt that could not be decided: the simulated caller's or a judge's model failed or answered
 * something that is not the structured output asked for. `raw` is what it answered, kept for the builder.
 */
export const AttemptError = z.object({
  role: z.enum(['simulator', 'judge']),
  message: z.string(),
  raw: z.string().nullable(),
});
export type AttemptError = z.infer<typeof AttemptError>;

/**
 * What a voice attempt's call sounded like, measured from its audio (the caller's speech as sent, the agent's
 * as played to the caller), on one clock whose 0 is the call's start (ms).
 */
export const VoiceFigures = z.object({
  durationMs: z.number().int().nonnegative(),
  /** Per caller turn: when its speech ended, and how long until the agent's first audio after it (null: none). */
  turns: z.array(
    z.object({
      callerEndMs: z.number().int().nonnegative(),
      responseMs: z.number().int().nonnegative().nullable(),
    }),
  ),
  /** The agent starting to talk while the caller was in the middle of a line (its pauses included). */
  agentInterruptions: z.object({
    count: z.number().int().nonnegative(),
    totalMs: z.number().int().nonnegative(),
  }),
  /** The caller talking over the agent on purpose: when, and how long the agent took to stop (null: never did). */
  bargeIns: z.array(
    z.object({
      atMs: z.number().int().nonnegative(),
      stopMs: z.number().int().nonnegative().nullable(),
    }),
  ),
  /** Silences the agent left the caller in longer than `silenceBoundMs`, and the longest of all. */
  silences: z.array(z.object({ atMs: z.number().int().nonnegative(), ms: z.number().int().nonnegative() })),
  silenceBoundMs: z.number().int().nonnegative(),
  longestSilenceMs: z.number().int().nonnegative(),
  /** How long each side talked. */
  talkMs: z.object({ agent: z.number().int().nonnegative(), caller: z.number().int().nonnegative() }),
  /** With background noise: the signal-to-noise ratio measured on the audio the agent received (dB). */
  noiseSnrDb: z.number().nullable(),
  /** What the caller heard the agent say (its STT), per agent turn. */
  heard: z.array(z.string()),
});
export type VoiceFigures = z.infer<typeof VoiceFigures>;

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
  /** What the caller said, per turn: the script's turns, or what the simulated caller chose. */
  userTurns: z.array(z.string()).default([]),
  /** Why the conversation stopped. */
  endedBy: AttemptEnd.default('turns'),
  /** The seed the agent's model ran with (null: its provider takes none); the same seed runs it again. */
  seed: z.number().int().nullable().default(null),
  /** The judges' decisions; null when the case has no criteria or an expectation failed first. */
  judgements: z.array(Judgement).nullable().default(null),
  usage: UsageByRole.default({ agent: [], simulator: [], judge: [] }),
  /** Set when the attempt errored after its conversation began (the transcript is still browsable). */
  error: AttemptError.nullable().default(null),
  /** A voice attempt's figures, measured from its audio; null for a text attempt. */
  voice: VoiceFigures.nullable().default(null),
});
export type CaseObservation = z.infer<typeof CaseObservation>;

/** One expectation that did not hold: which, what was expected, what happened. */
export const CaseFailure = z.object({
  /** `criterion`: a judge decided against it (`expected` is the criterion's name, `actual` the judgement). */
  expectation: z.enum([
    'steps',
    'ends',
    'endsAt',
    'replyContains',
    'structured',
    'maxResponseMs',
    'maxAgentInterruptions',
    'maxSilenceMs',
    'maxBargeInStopMs',
    'criterion',
  ]),
  expected: JsonValue,
  actual: JsonValue,
  message: z.string(),
});
export type CaseFailure = z.infer<typeof CaseFailure>;

export const CaseVerdict = z.enum(['queued', 'running', 'passed', 'failed', 'errored']);
export type CaseVerdict = z.infer<typeof CaseVerdict>;

/** One of a case's repeats: its own conversation (a test session), verdict and failures. */
export const CaseAttempt = z.object({
  /** 0-based position among the case's repeats. */
  index: z.number().int().nonnegative(),
  verdict: CaseVerdict,
  failures: z.array(CaseFailure),
  observed: CaseObservation.nullable(),
  error: z.string().nullable(),
  /** What the failing simulator or judge model answered, when an attempt errored on it. */
  raw: z.string().nullable(),
});
export type CaseAttempt = z.infer<typeof CaseAttempt>;

export const CaseResult = z.object({
  caseId: Id,
  name: z.string(),
  /** passed: its pass rate met `minPassRate`; errored: it did not, and errored attempts are why. */
  verdict: CaseVerdict,
  /** How many times it was started (a case whose playground instance died is started once more). */
  attempts: z.number().int().nonnegative(),
  /** The first attempt that did not pass (else the first): its failures and observation. */
  failures: z.array(CaseFailure),
  observed: CaseObservation.nullable(),
  /** Why it errored (it could not run to the end), when it did. */
  error: z.string().nullable(),
  /** Passed attempts over all repeats (an errored attempt never passes); null until every one finished. */
  passRate: z.number().min(0).max(1).nullable().default(null),
  minPassRate: z.number().min(0).max(1).default(1),
  /** Every repeat, in order, each with its browsable test session. */
  repeats: z.array(CaseAttempt).default([]),
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
  /**
   * GET of one run: its cases from `casesFrom` on, as many as fit in one answer (about 4 MB of stored
   * results); the list: every case with its verdict, attempts and pass rate only (`failures`, `repeats`
   * empty, `observed` null).
   */
  cases: z.array(CaseResult),
  /** GET of one run: where this page of `cases` starts. */
  casesFrom: z.number().int().nonnegative().optional(),
  /** GET of one run: where the next page starts (`?casesFrom=`); null when this page holds the last case. */
  nextCasesFrom: z.number().int().nonnegative().nullable().optional(),
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
  /** Tokens this run used so far, by role (agent, simulated caller, judge), per provider and model. */
  usage: UsageByRole,
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
  /**
   * Run every attempt with this seed (an attempt's recorded `observed.seed`): the way to run a failed attempt
   * again the same way, as far as its providers make seeded sampling repeatable. Default: one drawn per attempt.
   */
  seed: z.number().int().min(0).max(2_147_483_646).optional(),
});
export type CreateTestRunBody = z.infer<typeof CreateTestRunBody>;

export const TestRunParams = z.object({ id: Id, runId: Id });
export type TestRunParams = z.infer<typeof TestRunParams>;

export const TestRunQuery = z
  .object({
    /** The first case of the page (0-based): `nextCasesFrom` of the previous page. */
    casesFrom: z
      .string()
      .regex(/^(0|[1-9][0-9]{0,5})$/, 'must be a non-negative integer')
      .optional(),
  })
  .strict();
export type TestRunQuery = z.infer<typeof TestRunQuery>;

/** The deploy gate of one agent: when on, a deploy goes live only on a version whose last run passed. */
export const DeployGate = z.object({ enabled: z.boolean() });
export type DeployGate = z.infer<typeof DeployGate>;
