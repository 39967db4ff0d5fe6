import { z } from 'zod';
import { ApiKeys, Id, subjectToken } from './common.js';
import { Flow } from './flow.js';

// ---- the voice WebSocket (docs/api.md › Voice sessions) -----------------------------------------

/** Sample rates a client may send and receive 16-bit mono PCM at. */
export const VOICE_SAMPLE_RATES = [8000, 16000, 24000, 48000] as const;
/** Frame lengths a client may send (ms of audio per binary message). */
export const VOICE_FRAME_MS = [10, 20, 40, 60] as const;

// The protocol's audio (16-bit mono PCM) made and joined: here, in the one package the services and the test
// kit both build on, so the playground's simulated callers and the tests' callers make it the one way.

/** `ms` of silence at `sampleRate`. */
export const pcmSilence = (ms: number, sampleRate: number): Int16Array =>
  new Int16Array(Math.round((ms / 1000) * sampleRate));

/** The parts one after another, as one buffer. */
export function concatPcm(parts: readonly Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export const VoiceAudioFormat = z
  .object({
    sampleRate: z
      .union(VOICE_SAMPLE_RATES.map((r) => z.literal(r)) as [z.ZodLiteral<8000>, ...z.ZodLiteral<number>[]])
      .default(16000)
      .describe('Hz of the 16-bit mono PCM the client sends and receives'),
    frameMs: z
      .union(VOICE_FRAME_MS.map((r) => z.literal(r)) as [z.ZodLiteral<10>, ...z.ZodLiteral<number>[]])
      .default(20)
      .describe('ms of audio in each binary message the client sends'),
  })
  .strict();
export type VoiceAudioFormat = z.infer<typeof VoiceAudioFormat>;

export const StartVoiceSessionBody = z
  .object({
    /** A flow to try instead of the agent's latest stored one (e.g. unsaved edits). */
    flow: Flow.nullish(),
    /** A stored version to run instead of the latest (not with `flow`). */
    version: z.number().int().positive().nullish(),
    /** Provider keys by provider id; the server environment is the fallback (the key rule applies). */
    apiKeys: ApiKeys.nullish(),
    audio: VoiceAudioFormat.default({ sampleRate: 16000, frameMs: 20 }),
    /** false: this session is not recorded (recordings are on unless the operator set `RECORDINGS=off`). */
    record: z.boolean().default(true),
  })
  .strict();
export type StartVoiceSessionBody = z.infer<typeof StartVoiceSessionBody>;

export const VoiceSessionStarted = z.object({
  /** The test session (sessionType "voice") that records this conversation. */
  sessionId: Id,
  /** Where to open the WebSocket (same origin; a ticket or the bearer token authenticates it). */
  audioPath: z.string(),
  audio: z.object({
    sampleRate: z.number().int(),
    frameMs: z.number().int(),
    /** The exact size of every binary message the client sends. */
    frameBytes: z.number().int(),
  }),
  /** The session ends when no client has opened the audio socket within this many ms. */
  connectWithinMs: z.number().int(),
});
export type VoiceSessionStarted = z.infer<typeof VoiceSessionStarted>;

/** One key of a phone's keypad, as DTMF carries it (A–D: the fourth column some keypads have). */
export const DtmfDigit = z.string().regex(/^[0-9*#A-D]$/, 'must be one DTMF digit: 0-9, *, #, A-D');
export type DtmfDigit = z.infer<typeof DtmfDigit>;

/** JSON messages a client sends on the audio socket (binary messages are its microphone's PCM). */
export const VoiceClientMessage = z.discriminatedUnion('type', [
  /**
   * The agent's audio up to a `playback_flush` has played out, or (`interrupted`) playback stopped after a
   * `playback_clear`: `playedMs` of the segment were heard. The agent keeps only what was heard.
   */
  z
    .object({
      type: z.literal('playback_finished'),
      playedMs: z.number().nonnegative().max(3_600_000),
      interrupted: z.boolean(),
    })
    .strict(),
  /** Ends the session (closing the socket does too). */
  z.object({ type: z.literal('end') }).strict(),
  /**
   * A key the caller pressed (a phone's DTMF; the telephony service relays Twilio's `dtmf`): a `dtmf` session
   * event and a user turn `DTMF: <digit>`, so the flow's steps and the model can act on it.
   */
  z.object({ type: z.literal('dtmf'), digit: DtmfDigit }).strict(),
]);
export type VoiceClientMessage = z.infer<typeof VoiceClientMessage>;

/** JSON messages the server sends on the audio socket besides the agent's PCM (binary messages). */
export type VoiceServerMessage =
  | {
      type: 'ready';
      sessionId: string;
      sampleRate: number;
      frameBytes: number;
      /**
       * Reopens this session's socket on any gateway (`?resume=`) after this one dropped: signed by the session's
       * owner, bound to the session, replaced by the next `ready` (single use).
       */
      resumeToken: string;
      /** How long the session waits, silent, for a dropped client to resume before it ends (`gateway_lost`). */
      resumeWithinMs: number;
    }
  /** The agent's segment is complete: report `playback_finished` once it has played out. */
  | { type: 'playback_flush' }
  /** Stop playing and drop what is buffered (the user interrupted): report what was played. */
  | { type: 'playback_clear' }
  /** Pause playback (a possible interruption) / resume it (it was not one). */
  | { type: 'playback_pause' }
  | { type: 'playback_resume' }
  /** One of the session's events, exactly as its Server-Sent Events stream carries it. */
  | { type: 'event'; event: unknown }
  /**
   * A phone call's edge only (the telephony service), sent as a request: hand the call to a person at this
   * number (a transfer step's `targetNumber`). Answered with a `PhoneTransferAnswer`; never sent to a web client.
   */
  | { type: 'transfer'; targetNumber: string };

/** The telephony relay's answer to a `transfer`: handed over, or why not (`unavailable`: no Twilio account set). */
export const PhoneTransferAnswer = z.object({
  ok: z.boolean(),
  reason: z.enum(['unavailable', 'error']).optional(),
});
export type PhoneTransferAnswer = z.infer<typeof PhoneTransferAnswer>;

/** Close codes of the audio socket (4000–4999 are the application's, RFC 6455 § 7.4.2). */
export const VoiceCloseCodes = {
  /** The session ended (its reason is the close reason). */
  ended: 1000,
  /** A frame of the wrong size, a JSON message that is not one of VoiceClientMessage, or garbage. */
  badInput: 4400,
  /** Not allowed in; or a `resume` token that is not this session's current one. */
  unauthorized: 4401,
  notFound: 4404,
  /** A second client on a session that has one. */
  taken: 4409,
  /** Audio faster than real time beyond the allowed burst, or JSON messages beyond their rate. */
  tooFast: 4429,
  /** The client left too much of the agent's audio unread. */
  tooSlow: 4408,
  /** The instance running the session is gone. */
  lost: 4503,
  /** The gateway failed relaying the socket (a fault of ours, logged as `VOICE_RELAY_FAILED`). */
  internal: 1011,
} as const;

// ---- between the gateway and the session's owner --------------------------------------------------

/** Binary PCM from the client (no headers), or a JSON control message (header `Voice-Control: 1`). */
export const voiceInSubject = (sessionId: string) => `voice.${subjectToken(sessionId, 'a session id')}.in`;
/** The agent's PCM (no headers), or a JSON VoiceServerMessage (header `Voice-Control: 1`). */
export const voiceOutSubject = (sessionId: string) => `voice.${subjectToken(sessionId, 'a session id')}.out`;
export const VOICE_CONTROL_HEADER = 'Voice-Control';
/**
 * A relay's own subject (`voice-relay.<connectionId>`): the session's owner asks it, often, whether the gateway
 * relaying the socket is still there (no responders: it died, and the session waits for a resume).
 */
export const voiceRelaySubject = (connectionId: string) =>
  `voice-relay.${subjectToken(connectionId, 'a connection id')}`;

/**
 * A resume token (`ready`'s `resumeToken`): `r1.<agentId>.<generation>.<signature>`. The owner alone checks the
 * signature; the agent's id in it lets a public call's socket (whose single-use ticket named the agent) be
 * reopened without a new ticket.
 */
export const VoiceResumeToken = z
  .string()
  .max(256)
  .regex(/^r1\.[A-Za-z0-9_-]{1,64}\.[0-9]{1,9}\.[A-Za-z0-9_-]{43}$/, 'not a resume token');
export type VoiceResumeToken = z.infer<typeof VoiceResumeToken>;
/** The agent a resume token names (unverified: its owner checks the token). */
export const agentOfResumeToken = (token: VoiceResumeToken): string => token.split('.')[1] ?? '';

/** The gateway's socket attaches to the session at its owner (`playground.owner.<id>.attach`). */
export const VoiceAttachRequest = z.object({
  agentId: Id,
  sessionId: Id,
  /** This socket's id: a second attach with another id is refused while this one holds the session. */
  connectionId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  /**
   * The attacher answers `voice-relay.<connectionId>` (the gateway's relay): its owner probes it, and takes the
   * client for detached (resumable) when it is gone. Without it (a phone call's Media Stream), nothing is probed.
   */
  relay: z.literal(true).optional(),
  /** A dropped client's socket takes its session back (its last `ready`'s token). */
  resume: VoiceResumeToken.optional(),
});
export type VoiceAttachRequest = z.infer<typeof VoiceAttachRequest>;
export const VoiceAttached = z.object({
  sampleRate: z.number().int(),
  frameBytes: z.number().int(),
  /** On a resume: the session's last event then (the client had those; it is sent the ones after). */
  lastEventId: z.number().int().nonnegative().optional(),
});
export type VoiceAttached = z.infer<typeof VoiceAttached>;
