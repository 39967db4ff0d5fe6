import type { NatsConnection } from '@nats-io/transport-node';
import type { BusClient, Logger } from '@vab/bus';
import {
  EndedReason,
  Subjects,
  type EndedDetail,
  type Recording,
  type SessionType,
  type SessionUsage,
} from '@vab/contracts';
import { AudioRecording } from '../recording/audio-recording.js';
import type { EncoderHost } from '../recording/encoder-host.js';
import type { RecorderThread } from '../recording/recorder-thread.js';
import type { RecordingsBucket } from '../recording/recordings-bucket.js';
import { SessionEvents } from './events.js';
import { TranscriptWriter } from './transcript-writer.js';
import type { Redactor } from './redactor.js';

/** Where voice sessions' recordings go, and what encodes them. */
export interface Recordings {
  bucket: RecordingsBucket;
  encoders: EncoderHost;
  timeline: RecorderThread;
}

export interface RecordDeps {
  nc: NatsConnection;
  bus: BusClient;
  log: Logger;
  timeoutMs: number;
  /** None when recordings are off. */
  recordings?: Recordings | undefined;
}

/**
 * The test session a hosted session of a stored agent is recorded as, kept by the sessions service: made at
 * the start, its transcript written as it goes (`transcript`), its events streamed (`events`), its audio
 * recorded (voice), and closed once with what the session used and the errors it saw.
 */
export class TestSessionRecord {
  /** The duration the record was closed with: the session_ended event reports the same. */
  durationMs: number | undefined;
  /** Why the session stopped (a call's `endedReason` is read from it). */
  private stopReason: string | undefined;
  /** Where a call that stopped `transferred` went. */
  private transferredTo: string | undefined;
  /** Why the edge closed a call's caller side, as it said (`playground.calls.end`'s `detail`). */
  private endedDetail: EndedDetail | undefined;

  private constructor(
    private readonly deps: RecordDeps,
    readonly transcript: TranscriptWriter,
    readonly events: SessionEvents,
    /** A call's record (issue 45): its recording is named on the call (`sessions.calls.recording`). */
    private readonly isCall = false,
  ) {}

  /**
   * A call of a live deploy, admitted by the sessions service already (`sessions.calls.admit` made it): its
   * transcript goes to `sessions.calls.append`, its end to `sessions.calls.end` with the reason it stopped.
   */
  static forCall(
    deps: RecordDeps,
    opts: { agentId: string; callId: string; version: number | null; redactor: Redactor },
  ): TestSessionRecord {
    const { bus, timeoutMs } = deps;
    const { agentId, callId } = opts;
    const ask = { timeoutMs, requestId: callId };
    let record: TestSessionRecord | undefined = undefined;
    const transcript = new TranscriptWriter({
      bus,
      agentId,
      sessionId: callId,
      startedAt: Date.now(),
      log: deps.log,
      timeoutMs,
      redactor: opts.redactor,
      sink: {
        append: (message) => bus.request(Subjects.callsAppend, { agentId, callId, message }, ask),
        close: (endedAt, report) =>
          bus.request(
            Subjects.callsEnd,
            {
              agentId,
              callId,
              endedAt,
              ...endedReasonOf(record?.stopReason),
              ...(record?.endedDetail !== undefined ? { endedDetail: record.endedDetail } : {}),
              ...(record?.transferredTo !== undefined ? { transferredTo: record.transferredTo } : {}),
              usage: report?.usage ?? [],
            },
            ask,
          ),
      },
    });
    const events = new SessionEvents(deps.nc, agentId, callId, deps.log);
    events.emit({ type: 'session_started', sessionType: 'voice', version: opts.version });
    record = new TestSessionRecord(deps, transcript, events, true);
    return record;
  }

  /** Creates the record on the sessions service, and the session's event stream with its session_started. */
  static async create(
    deps: RecordDeps,
    opts: {
      agentId: string;
      sessionType: SessionType;
      version: number | null;
      roomName?: string | undefined;
      requestId: string;
      redactor: Redactor;
    },
  ): Promise<TestSessionRecord> {
    const { bus, timeoutMs } = deps;
    // the test session's `id` (the API's name for it) is the session's id from here on
    const { id: sessionId, startedAt } = await bus.request(
      Subjects.testSessionsCreate,
      {
        agentId: opts.agentId,
        session: {
          sessionType: opts.sessionType,
          version: opts.version,
          ...(opts.roomName ? { roomName: opts.roomName } : {}),
        },
      },
      { timeoutMs, requestId: opts.requestId },
    );
    const transcript = new TranscriptWriter({
      bus,
      agentId: opts.agentId,
      sessionId,
      startedAt,
      log: deps.log,
      timeoutMs,
      redactor: opts.redactor,
    });
    const events = new SessionEvents(deps.nc, opts.agentId, sessionId, deps.log);
    events.emit({ type: 'session_started', sessionType: opts.sessionType, version: opts.version });
    return new TestSessionRecord(deps, transcript, events);
  }

  get sessionId(): string {
    return this.transcript.sessionId;
  }

  /** The session's audio recording (voice), when recordings are on; `log` is the session's. */
  audioRecording(log: Logger): AudioRecording | undefined {
    const { recordings, bus, timeoutMs } = this.deps;
    if (!recordings) return undefined;
    const { agentId, sessionId } = this.transcript;
    return new AudioRecording({
      ...recordings,
      bus,
      agentId,
      sessionId,
      emit: (event, at) => this.events.emit(event, at),
      log,
      timeoutMs,
      // the call's id as the request's, as for its transcript
      ...(this.isCall
        ? {
            named: (recording: Recording) =>
              bus.request(
                Subjects.callsRecording,
                { agentId, callId: sessionId, recording },
                { timeoutMs, requestId: sessionId },
              ),
          }
        : {}),
    });
  }

  /** Closes the record with what the session used and the errors it saw (the stats count them). */
  async close(
    usage: SessionUsage,
    failedTurns: number,
    stopReason?: string,
    end?: { transferredTo?: string | undefined; endedDetail?: EndedDetail | undefined },
  ): Promise<void> {
    if (this.stopReason === undefined) {
      this.stopReason = stopReason;
      this.transferredTo = end?.transferredTo;
      this.endedDetail = end?.endedDetail;
    }
    if (usage.length > 0) this.events.emit({ type: 'usage', usage });
    this.durationMs = await this.transcript.close({
      usage,
      errors: this.events.errors,
      ...(failedTurns > 0 ? { failedTurns } : {}),
    });
  }
}

/**
 * A call's `endedReason` from why its session stopped: a reason given as one already (`playground.calls.end`,
 * the call's own timers), else the session's stop reasons (the client's `end` or silence, an end step, the
 * session's bounds, a drain, a start that failed).
 */
export function endedReasonOf(stopReason: string | undefined): {
  endedReason: EndedReason;
  endedDetail?: EndedDetail;
} {
  const given = EndedReason.safeParse(stopReason);
  if (given.success) return { endedReason: given.data };
  switch (stopReason) {
    case 'end step':
      return { endedReason: 'agent_ended' };
    case 'maximum session length':
      return { endedReason: 'max_duration' };
    case 'client never connected':
      return { endedReason: 'no_connect' };
    case 'shutdown':
      return { endedReason: 'drained' };
    case 'behind real time':
      // the instance is up but could not keep up with this call: not `instance_lost`, which sends an
      // operator looking for a dead process
      return { endedReason: 'overloaded' };
    case 'voice pipeline failed':
    case 'failed start':
      return { endedReason: 'provider_error', endedDetail: { kind: 'start' } };
    default:
      // 'client ended', 'client gone', 'delete' and the gateway's close reasons: the caller's side went away
      return { endedReason: 'caller_hung_up' };
  }
}
