import type { voice } from '@livekit/agents';
import type { Logger } from '@vab/bus';
import type { OwnerVerb, SessionEventInput, SessionType, SessionUsage, TurnResult } from '@vab/contracts';
import type { z } from 'zod';
import type { TranscriptWriter } from './transcript-writer.js';
import type { Redactor } from './redactor.js';
import type { LoadConfig } from './load.js';

export interface HostedSessionsConfig extends LoadConfig {
  /** Sessions (voice and text together) one instance runs at once. */
  MAX_SESSIONS: number;
  /** Sessions one caller may hold at once here (0: no quota). */
  MAX_SESSIONS_PER_CALLER?: number;
  MAX_SESSION_MS: number;
  /** A text session with no turn for this long is stopped. */
  TEXT_SESSION_IDLE_MS: number;
  BUS_TIMEOUT_MS: number;
  /** Bound on a forwarded stop: the owner may be deleting a room. */
  MEDIA_SERVER_TIMEOUT_MS: number;
}

/** What a transport gets while it starts a session, and keeps for the session's life. */
export interface SessionContext {
  /** The session's id: its test session's, or the transport's own (a room session's room name). */
  sessionId: string;
  log: Logger;
  /** Writes the session's transcript to its test session (when it belongs to a stored agent). */
  transcript: TranscriptWriter | undefined;
  /**
   * Records a voice session's audio: LiveKit's recorder wraps the session's audio input and output, which must
   * be set and not yet read (before `session.start`); stored when the session stops. Nothing when recordings
   * are off, the start opted out, or the session has no test session.
   */
  recordAudio(session: voice.AgentSession): Promise<void>;
  /** Adds an event to the session's stream (nothing without a test session: the stream is the record's). */
  emit(event: SessionEventInput): void;
  /** The id of the last event emitted (0: none). */
  lastEventId(): number;
  /** Where the session's usage is read when its record closes (the transport's LiveKit session). */
  usageFrom(read: () => SessionUsage): void;
  /** Closes the test-session record now (the conversation said goodbye), with its usage and errors. Once. */
  closeRecord(): Promise<void>;
  /** Registers what stopping must undo (run in reverse order); at once if the session has already stopped. */
  onStop(cleanup: () => Promise<void>): void;
  /**
   * What the session says before a drain ends it (a voice session's goodbye): resolves once said, or is cut
   * off after `boundMs`.
   */
  onDrain(goodbye: (boundMs: number) => Promise<void>): void;
  /**
   * Stops the session (idempotent): the transport's signal that its agent or room is gone. `end`: more about
   * it for a call's record (where a `transferred` call went).
   */
  stop(reason: string, end?: { transferredTo?: string | undefined }): void;
  /** Stops it after `ms` unless called again first (e.g. the last user left the room). */
  stopAfter(ms: number, reason: string): void;
  /** Cancels a `stopAfter` (e.g. the client connected in time). */
  cancelStop(): void;
  /**
   * Answers requests on one of the session's owner subjects (`playground.owner.<sessionId>.<verb>`) for as long as
   * it runs: whichever instance a request reached, it comes here.
   */
  answerOwner<T extends z.ZodType, R>(
    verb: OwnerVerb,
    schema: T,
    handler: (req: z.output<T>, requestId: string) => Promise<R>,
  ): void;
}

/** A user's typed turn in a session, as every layer passes it on. */
export interface UserTurn {
  agentId: string;
  sessionId: string;
  text: string;
  requestId: string;
}

export interface OpenOptions {
  sessionType: SessionType;
  /** The session's id when the transport has one (a room session's room name); else its test session's. */
  sessionId?: string;
  /** Records the session as a test session of this stored agent. */
  agentId?: string | undefined;
  /** The agent version it runs; null for a draft flow. */
  version?: number | null;
  roomName?: string;
  requestId: string;
  /** What the client is told when the start fails for a reason that is not an API error of ours. */
  failure: string;
  /** The credentials in play (`sessionRedactor`): removed from everything the session lets out. */
  redactor?: Redactor | undefined;
  /** false: the start opted out of recording its audio. */
  recordAudio?: boolean;
  /**
   * A call of a live deploy (issue 45): recorded as that call (`sessions.calls.*`, admitted already), not as a
   * test session; its id is the session's.
   */
  call?: { callId: string } | undefined;
}

export interface Started<R> {
  result: R;
  /** A user turn (text sessions). */
  turn?: (text: string) => Promise<TurnResult>;
}
