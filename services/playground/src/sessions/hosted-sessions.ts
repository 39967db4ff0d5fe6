import { context, trace, type SpanContext } from '@opentelemetry/api';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { safeError, type BusClient, type Logger, type Served } from '@vab/bus';
import {
  AppError,
  OwnerEndRequest,
  TextTurnRequest,
  type EndedDetail,
  type Ok,
  type SessionType,
  type SessionUsage,
  type TextTurnResult,
  type TurnResult,
} from '@vab/contracts';
import type { AudioRecording } from '../recording/audio-recording.js';
import { observeTurn } from '../observability/metrics.js';
import { inSession } from '../observability/telemetry.js';
import { Admission } from './admission.js';
import { LoadMonitor } from './load.js';
import type { CallerSlot, CallerSlots } from './caller-slots.js';
import { notFound, OwnerRouting } from './owner-routing.js';
import { redactedError, Redactor, secretsInPlay } from './redactor.js';
import type {
  HostedSessionsConfig,
  OpenOptions,
  SessionContext,
  Started,
  UserTurn,
} from './session-context.js';
import { TestSessionRecord, type Recordings } from './test-session-record.js';

/** `session_ended`'s reason for a session whose audio fell too far behind real time (SESSION_MAX_BEHIND_MS). */
export const BEHIND_REAL_TIME = 'behind real time';
/** `session_ended`'s reason for a session its instance's drain (SIGTERM) ended: it did not finish in time. */
export const DRAINED = 'drained';

/** `work`, or nothing more once `ms` passed. */
async function withinBound(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([work, bound]);
  } finally {
    clearTimeout(timer);
  }
}

interface HostedSession {
  /** Its id: its test session's, or the transport's own (a room session's room name). */
  sessionId: string;
  /** Who started it (Headers.caller), for the per-caller quota. */
  caller: string | undefined;
  /** The caller's slot it holds across instances (none without a caller or a quota). */
  slot?: CallerSlot | undefined;
  sessionType: SessionType;
  agentId: string | undefined;
  startedAt: number;
  log: Logger;
  redactor: Redactor;
  /** Takes the session's credentials out of the process log's filter (a while after it stopped). */
  releaseSecrets: () => void;
  /** Its test-session record (when it belongs to a stored agent). */
  record: TestSessionRecord | undefined;
  /** The session's audio recording (voice), when it may be recorded. */
  audio: AudioRecording | undefined;
  usage: (() => SessionUsage) | undefined;
  recordClosed: Promise<void> | undefined;
  /** Why it stops (the first reason given). */
  stopReason: string | undefined;
  /** Where a call stopped `transferred` went (the number), given with that stop. */
  transferredTo: string | undefined;
  /** A call's `endedDetail` as its edge gave it with that stop. */
  endedDetail: EndedDetail | undefined;
  /** What it says before a drain ends it. */
  goodbye: ((boundMs: number) => Promise<void>) | undefined;
  /** Turns (the greeting included) whose answer said a model failed: reported with the record. */
  failedTurns: number;
  cleanups: (() => Promise<void>)[];
  turn: ((text: string) => Promise<TurnResult>) | undefined;
  subs: Subscription[];
  /** Answers "still running" to event streams; left last, after the session's last event is stored. */
  live: Subscription | undefined;
  timers: Map<string, NodeJS.Timeout>;
  stopping: Promise<void> | undefined;
  /** Its capacity is given back (it is only storing its session_ended): it counts against no limit. */
  released: boolean;
  /**
   * The span the session started under. LiveKit parents every turn of a session (and its model calls) on
   * the session's span, so a session is one trace; each turn's own request links to it.
   */
  startedIn: SpanContext | undefined;
}

/** More about a stop, for the call it ends: where a `transferred` call went. */
export interface StopDetail {
  transferredTo?: string | undefined;
  /** A call's `endedDetail` as its edge gave it (`playground.calls.end`). */
  endedDetail?: EndedDetail | undefined;
}

/**
 * Every playground session this instance runs, voice or text, under one set of rules: admitted by one
 * capacity rule and the per-caller quota (`admission.ts`), requests for a session held elsewhere forwarded to
 * its owner (`owner-routing.ts`), idle and maximum timers, its test-session record
 * (`test-session-record.ts`), and one idempotent stop that undoes everything a transport registered.
 */
export class HostedSessions {
  private readonly sessions = new Map<string, HostedSession>();
  /** Sessions that gave their capacity back and are storing their session_ended. */
  private releasedCount = 0;
  private readonly admission: Admission;
  private readonly load: LoadMonitor;
  private readonly owners: OwnerRouting;

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      bus: BusClient;
      log: Logger;
      config: HostedSessionsConfig;
      /** The subjects that start sessions: left while the instance is full. */
      createSubjects: readonly string[];
      /** The callers' slots across instances (MAX_SESSIONS_PER_CALLER); none: this instance counts alone. */
      slots?: CallerSlots | undefined;
      /** Where voice sessions' recordings go, and what encodes them; none when recordings are off. */
      recordings?: Recordings | undefined;
    },
  ) {
    const { nc, bus, log, config } = deps;
    this.owners = new OwnerRouting({ nc, bus, log, config });
    this.admission = new Admission({
      log,
      config,
      createSubjects: deps.createSubjects,
      slots: deps.slots,
      sessions: {
        held: () => this.sessions.size - this.releasedCount,
        heldBy: (caller) => {
          let n = 0;
          for (const s of this.sessions.values()) if (s.caller === caller && !s.released) n++;
          return n;
        },
        count: (sessionType) => {
          let n = 0;
          for (const s of this.sessions.values()) if (s.sessionType === sessionType && !s.released) n++;
          return n;
        },
      },
    });
    this.load = new LoadMonitor({
      log,
      config,
      onChange: (overloaded) => void this.admission.setOverloaded(overloaded),
      tooFarBehind: (sessionId, behindMs) => {
        const hosted = this.sessions.get(sessionId);
        if (!hosted || hosted.stopping) return;
        hosted.log.warn(
          { code: 'SESSION_BEHIND_REAL_TIME', behindMs: Math.round(behindMs) },
          'session too far behind real time: ending it',
        );
        void this.stop(sessionId, BEHIND_REAL_TIME);
      },
    });
  }

  /**
   * Capacity is enforced on the served subjects from now on (the count and the load), and the process's
   * gauges read this host.
   */
  attach(served: Served): void {
    this.admission.attach(served);
    this.load.start();
  }

  /** The gauges stop reading this host (it has stopped). */
  detach(): void {
    this.load.stop();
    this.admission.detach();
  }

  /** The load measured last (the metrics read it). */
  get loadSample() {
    return this.load.last;
  }

  get overloaded(): boolean {
    return this.load.isOverloaded;
  }

  /** Takes no new session from now on (a drain): the instance leaves the start subjects' queue groups at once. */
  drain(): Promise<void> {
    return this.admission.drain();
  }

  /** Resolves once no session is held, or after `ms`: true when none is left. */
  async settled(ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    while (this.sessions.size > 0 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, Math.min(100, until - Date.now())));
    }
    return this.sessions.size === 0;
  }

  /**
   * A drain's end: every session still running says its goodbye (each within `goodbyeMs`, all at once), then
   * stops with the reason `drained`.
   */
  async endDrained(goodbyeMs: number): Promise<void> {
    await Promise.all(
      [...this.sessions.values()].map(async (hosted) => {
        if (hosted.stopping) return hosted.stopping;
        if (hosted.goodbye && goodbyeMs > 0) {
          hosted.log.info({ goodbyeMs }, 'drain: the session says goodbye');
          await withinBound(hosted.goodbye(goodbyeMs), goodbyeMs).catch((err: unknown) =>
            hosted.log.warn({ code: 'SESSION_CLEANUP_FAILED', err: safeError(err) }, 'goodbye not said'),
          );
        }
        return this.stop(hosted.sessionId, DRAINED);
      }),
    );
  }

  get capacity(): number {
    return this.admission.capacity;
  }

  get paused(): boolean {
    return this.admission.paused;
  }

  get size(): number {
    return this.admission.size;
  }

  count(sessionType: SessionType): number {
    return this.admission.count(sessionType);
  }

  /** Runs `start` (a session start) for `caller`: the session it opens counts against that caller's quota. */
  asCaller<T>(caller: string | undefined, start: () => Promise<T>): Promise<T> {
    return this.admission.asCaller(caller, start);
  }

  /**
   * Opens a session: admits it (`Admission.admit`: 503 CAPACITY_EXHAUSTED without capacity, 429 over its caller's quota), records
   * it as a test session, and runs the transport's `start`. A start that fails is undone by the same stop as
   * any other session.
   */
  async open<R>(
    opts: OpenOptions,
    start: (ctx: SessionContext) => Promise<Started<R>>,
  ): Promise<{ sessionId: string; result: R }> {
    const { admitted: hosted, slot } = await this.admission.admit(opts.requestId, (caller) =>
      this.register(opts, caller),
    );
    hosted.slot = slot;
    const { sessionId } = hosted;
    try {
      // the session's tasks (LiveKit's included) inherit this context: their lines name the session
      const started = await inSession({ sessionId, agentId: opts.agentId, requestId: opts.requestId }, () =>
        start(this.contextOf(hosted)),
      );
      // a flow that ends in its greeting has ended, not failed: its answer says `ended: true`
      if (hosted.stopping && hosted.stopReason !== 'end step')
        throw new AppError('UPSTREAM_FAILED', 'the session ended while it started');
      hosted.turn = started.turn;
      if (!hosted.stopping) this.touch(hosted);
      hosted.log.info({ sessionType: opts.sessionType }, 'session started');
      this.countFailure(hosted, started.result);
      return { sessionId, result: hosted.redactor.deep(started.result) };
    } catch (err) {
      hosted.log.warn(
        { code: 'SESSION_START_FAILED', err: safeError(err) },
        'session failed to start; cleaning up',
      );
      await this.stop(sessionId, 'failed start');
      if (err instanceof AppError) throw redactedError(hosted.redactor, err);
      throw new AppError('UPSTREAM_FAILED', opts.failure, { cause: err });
    }
  }

  private async register(opts: OpenOptions, caller: string | undefined): Promise<HostedSession> {
    const { bus, nc, config } = this.deps;
    const redactor = opts.redactor ?? new Redactor([]);
    const recordDeps = {
      nc,
      bus,
      log: this.deps.log,
      timeoutMs: config.BUS_TIMEOUT_MS,
      recordings: this.deps.recordings,
    };
    const record =
      opts.call && opts.agentId
        ? TestSessionRecord.forCall(recordDeps, {
            agentId: opts.agentId,
            callId: opts.call.callId,
            version: opts.version ?? null,
            redactor,
          })
        : opts.agentId
          ? await TestSessionRecord.create(recordDeps, {
              agentId: opts.agentId,
              sessionType: opts.sessionType,
              version: opts.version ?? null,
              roomName: opts.roomName,
              requestId: opts.requestId,
              redactor,
            })
          : undefined;
    const sessionId = opts.sessionId ?? record?.sessionId;
    if (sessionId === undefined) throw new Error('a session needs an id or a test session');
    const log = redactor.logger(this.deps.log, { sessionId, agentId: opts.agentId });
    const hosted: HostedSession = {
      sessionId,
      caller,
      sessionType: opts.sessionType,
      agentId: opts.agentId,
      startedAt: Date.now(),
      log,
      redactor,
      releaseSecrets: secretsInPlay.hold(redactor),
      record,
      audio: record && opts.recordAudio !== false ? record.audioRecording(log) : undefined,
      usage: undefined,
      recordClosed: undefined,
      stopReason: undefined,
      transferredTo: undefined,
      endedDetail: undefined,
      goodbye: undefined,
      failedTurns: 0,
      cleanups: [],
      turn: undefined,
      subs: [],
      live: record ? this.owners.live(record.sessionId) : undefined,
      timers: new Map(),
      stopping: undefined,
      released: false,
      startedIn: trace.getSpanContext(context.active()),
    };
    this.sessions.set(sessionId, hosted);
    hosted.subs.push(
      this.owners.answer(sessionId, 'end', OwnerEndRequest, async (req, requestId) => {
        await this.end(req.sessionId, req.agentId, requestId, req.reason, req.detail);
        return { ok: true } satisfies Ok;
      }),
    );
    if (opts.sessionType === 'text') {
      hosted.subs.push(
        this.owners.answer(sessionId, 'turn', TextTurnRequest, (req, requestId) =>
          this.turn({ ...req, requestId }),
        ),
      );
    }
    this.timer(hosted, 'max', config.MAX_SESSION_MS, 'maximum session length');
    return hosted;
  }

  private contextOf(hosted: HostedSession): SessionContext {
    return {
      sessionId: hosted.sessionId,
      log: hosted.log,
      transcript: hosted.record?.transcript,
      recordAudio: async (session) => {
        if (!hosted.stopping) await hosted.audio?.begin(session);
      },
      emit: (event) => {
        if (event.type === 'turn_metrics') observeTurn(hosted.sessionType, event.metrics);
        hosted.record?.events.emit(hosted.redactor.deep(event));
      },
      lastEventId: () => hosted.record?.events.lastId ?? 0,
      usageFrom: (read) => {
        hosted.usage = read;
      },
      closeRecord: () => this.closeRecord(hosted),
      onStop: (cleanup) => {
        if (hosted.stopping) void this.runCleanup(hosted, cleanup);
        else hosted.cleanups.push(cleanup);
      },
      onDrain: (goodbye) => {
        hosted.goodbye = goodbye;
      },
      stop: (reason, end) => void this.stop(hosted.sessionId, reason, end),
      stopAfter: (ms, reason) => this.timer(hosted, 'stop-after', ms, reason),
      cancelStop: () => clearTimeout(hosted.timers.get('stop-after')),
      answerOwner: (verb, schema, handler) => {
        hosted.subs.push(this.owners.answer(hosted.sessionId, verb, schema, handler));
      },
    };
  }

  private countFailure(hosted: HostedSession, result: unknown): void {
    if ((result as Partial<TurnResult> | undefined)?.error) hosted.failedTurns++;
  }

  /** The record closes with what the session used and the errors it saw (the stats count them). */
  private closeRecord(hosted: HostedSession): Promise<void> {
    // once: a conversation's goodbye closes it, and the stop that follows must not report its usage again
    hosted.recordClosed ??= this.closeRecordOnce(hosted);
    return hosted.recordClosed;
  }

  private async closeRecordOnce(hosted: HostedSession): Promise<void> {
    let usage: SessionUsage = [];
    try {
      usage = hosted.usage?.() ?? [];
    } catch (err) {
      hosted.log.warn({ code: 'SESSION_USAGE_NOT_READ', err: safeError(err) }, 'session usage not read');
    }
    await hosted.record?.close(usage, hosted.failedTurns, hosted.stopReason, {
      transferredTo: hosted.transferredTo,
      endedDetail: hosted.endedDetail,
    });
  }

  private timer(hosted: HostedSession, name: string, ms: number, reason: string): void {
    clearTimeout(hosted.timers.get(name));
    const t = setTimeout(() => void this.stop(hosted.sessionId, reason), ms);
    t.unref();
    hosted.timers.set(name, t);
  }

  private touch(hosted: HostedSession): void {
    if (hosted.sessionType === 'text') {
      this.timer(hosted, 'idle', this.deps.config.TEXT_SESSION_IDLE_MS, 'idle');
    }
  }

  /** A user turn of a text session, here or at its owner. */
  async turn(req: UserTurn): Promise<TextTurnResult> {
    const { sessionId, agentId, text, requestId } = req;
    const hosted = this.sessions.get(sessionId);
    if (!hosted) return this.owners.forwardTurn(req);
    if (hosted.agentId !== agentId || !hosted.turn || hosted.stopping) throw notFound(sessionId);
    this.touch(hosted);
    const span = trace.getActiveSpan();
    if (hosted.startedIn && span?.isRecording()) span.addLink({ context: hosted.startedIn });
    const run = hosted.turn;
    try {
      // what LiveKit logs during the turn names the session and the request
      const result = await inSession({ sessionId, agentId, requestId }, () => run(text));
      this.countFailure(hosted, result);
      return { sessionId, ...hosted.redactor.deep(result) };
    } catch (err) {
      throw err instanceof AppError ? redactedError(hosted.redactor, err) : err;
    }
  }

  /**
   * Ends a session wherever it runs. True when a live session was stopped (here or by its owner); false when
   * no instance holds it. A text session of another agent is left alone (and reported as ended). `reason`
   * is `session_ended`'s: `delete` unless the caller knows better (the gateway closing a voice socket).
   */
  async end(
    sessionId: string,
    agentId: string | undefined,
    requestId: string,
    reason = 'delete',
    detail?: EndedDetail,
  ): Promise<boolean> {
    const hosted = this.sessions.get(sessionId);
    if (!hosted) return this.owners.forwardEnd(sessionId, agentId, requestId, reason, detail);
    if (agentId !== undefined && hosted.agentId !== agentId) return true;
    await this.stop(sessionId, reason, { endedDetail: detail });
    return true;
  }

  /** The one way a session ends. Idempotent: a second call waits for the first. */
  stop(sessionId: string, reason: string, end?: StopDetail): Promise<void> {
    const hosted = this.sessions.get(sessionId);
    if (!hosted) return Promise.resolve();
    if (hosted.stopReason === undefined) {
      hosted.stopReason = reason;
      hosted.transferredTo = end?.transferredTo;
      hosted.endedDetail = end?.endedDetail;
    }
    hosted.stopping ??= (async () => {
      for (const t of hosted.timers.values()) clearTimeout(t);
      for (const s of hosted.subs) s.unsubscribe();
      for (const cleanup of hosted.cleanups.reverse()) await this.runCleanup(hosted, cleanup);
      // the audio is closed with the session (a cleanup): stored and on the record before the session ends
      await hosted.audio?.finish();
      await this.closeRecord(hosted);
      // the capacity is free before session_ended says the session ended: a client that starts another on
      // that event is taken (the instance back in the queue groups, the caller's slot given back)
      hosted.released = true;
      this.releasedCount++;
      try {
        await hosted.slot?.release();
        await this.admission.recount();
        await hosted.record?.events.emitLast({
          type: 'session_ended',
          reason,
          durationMs: hosted.record.durationMs ?? Date.now() - hosted.startedAt,
        });
      } finally {
        // after the last event is stored: a stream that finds no one here finds the session_ended
        hosted.live?.unsubscribe();
        this.sessions.delete(sessionId);
        this.releasedCount--;
        hosted.releaseSecrets();
      }
      hosted.log.info(
        { sessionType: hosted.sessionType, reason, durationMs: Date.now() - hosted.startedAt },
        'session stopped',
      );
    })();
    return hosted.stopping;
  }

  private async runCleanup(hosted: HostedSession, cleanup: () => Promise<void>): Promise<void> {
    await cleanup().catch((err: unknown) =>
      hosted.log.warn({ code: 'SESSION_CLEANUP_FAILED', err: safeError(err) }, 'session cleanup failed'),
    );
  }

  async stopAll(reason: string): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((sessionId) => this.stop(sessionId, reason)));
  }
}
