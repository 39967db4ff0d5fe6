import { context, trace, type SpanContext } from '@opentelemetry/api';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { answer, safeError, type BusClient, type Logger, type Served } from '@vab/bus';
import {
  AppError,
  liveSubject,
  OwnerEndRequest,
  ownerSubject,
  specOf,
  Subjects,
  TextTurnRequest,
  type Ok,
  type OwnerVerb,
  type SessionEventInput,
  type SessionType,
  type SessionUsage,
  type TextTurnResult,
  type TurnResult,
} from '@vab/contracts';
import type { voice } from '@livekit/agents';
import type { z } from 'zod';
import { AudioRecording } from './audio-recording.js';
import type { CallerSlot, CallerSlots } from './caller-slots.js';
import type { EncoderHost } from './encoder-host.js';
import type { RecorderThread } from './recorder-thread.js';
import type { RecordingsBucket } from './recordings-bucket.js';
import { observeTurn, playgroundMetrics, type HostView } from '../metrics.js';
import { SessionEvents } from './events.js';
import { Recorder } from './recorder.js';
import { inSession } from '../telemetry.js';
import { Redactor, secretsInPlay } from './redactor.js';

export interface HostConfig {
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
  key: string;
  log: Logger;
  /** The test session recording this one (when it belongs to a stored agent). */
  recorder: Recorder | undefined;
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
  /** Stops the session (idempotent): the transport's signal that its agent or room is gone. */
  stop(reason: string): void;
  /** Stops it after `ms` unless called again first (e.g. the last user left the room). */
  stopAfter(ms: number, reason: string): void;
  /** Cancels a `stopAfter` (e.g. the client connected in time). */
  cancelStop(): void;
  /**
   * Answers requests on one of the session's owner subjects (`playground.owner.<key>.<verb>`) for as long as
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
  /** The session's key when the transport has one (a room name); else the id of its test session. */
  key?: string;
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
}

export interface Started<R> {
  result: R;
  /** A user turn (text sessions). */
  turn?: (text: string) => Promise<TurnResult>;
}

interface Hosted {
  key: string;
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
  recorder: Recorder | undefined;
  /** The session's audio recording (voice), when it may be recorded. */
  audio: AudioRecording | undefined;
  events: SessionEvents | undefined;
  usage: (() => SessionUsage) | undefined;
  recordClosed: Promise<void> | undefined;
  /** The duration the record was closed with: the session_ended event reports the same. */
  durationMs: number | undefined;
  /** Why it stops (the first reason given). */
  stopReason: string | undefined;
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

/** Turns take a model call or several; a forwarded one waits as long as the route does. */
const FORWARDED_TURN_TIMEOUT_MS = specOf(Subjects.textSessionTurn).timeoutMs!;

/** An API error as it may leave: its message and details without the session's credentials. */
function redactedError(redactor: Redactor, err: AppError): AppError {
  if (redactor.empty) return err;
  const message = redactor.text(err.message);
  const details = redactor.deep(err.details);
  const issues = redactor.deep(err.issues);
  if (message === err.message && details === err.details && issues === err.issues) return err;
  return new AppError(err.code, message, {
    ...(issues ? { issues } : {}),
    ...(details !== undefined ? { details } : {}),
  });
}

const notFound = (key: string) =>
  new AppError('NOT_FOUND', `text session ${key} not found (ended or expired)`);

/**
 * Every playground session this instance runs, voice or text, under one set of rules: one capacity rule
 * (at MAX_SESSIONS the instance leaves the create subjects' queue groups, and rejoins when a slot frees),
 * requests for a session held elsewhere forwarded to the owner's subject, idle and maximum timers, the
 * test-session recorder, and one idempotent stop that undoes everything a transport registered.
 */
export class SessionHost implements HostView {
  private readonly sessions = new Map<string, Hosted>();
  /** Starts under way whose key is not known yet: they hold a slot. */
  private reserved = 0;
  /** Sessions that gave their capacity back and are storing their session_ended. */
  private releasedCount = 0;
  /** Starts under way per caller: they count against the caller's quota. */
  private readonly reservedBy = new Map<string, number>();
  /** The caller a start runs for (`asCaller`), read where the session opens: the transports need not pass it. */
  private readonly callerScope = new AsyncLocalStorage<string | undefined>();
  private served: Served | undefined;
  private full = false;

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      bus: BusClient;
      log: Logger;
      config: HostConfig;
      /** The subjects that start sessions: left while the instance is full. */
      createSubjects: readonly string[];
      /** The callers' slots across instances (MAX_SESSIONS_PER_CALLER); none: this instance counts alone. */
      slots?: CallerSlots | undefined;
      /** Where voice sessions' recordings go, and what encodes them; none when recordings are off. */
      recordings?: { bucket: RecordingsBucket; encoders: EncoderHost; timeline: RecorderThread } | undefined;
    },
  ) {}

  /** Capacity is enforced on the served subjects from now on, and the process's gauges read this host. */
  attach(served: Served): void {
    this.served = served;
    playgroundMetrics().hosts.add(this);
    void this.recount();
  }

  /** The gauges stop reading this host (it has stopped). */
  detach(): void {
    playgroundMetrics().hosts.delete(this);
  }

  get capacity(): number {
    return this.deps.config.MAX_SESSIONS;
  }

  get paused(): boolean {
    return this.full;
  }

  get size(): number {
    return this.sessions.size - this.releasedCount + this.reserved;
  }

  count(sessionType: SessionType): number {
    let n = 0;
    for (const s of this.sessions.values()) if (s.sessionType === sessionType && !s.released) n++;
    return n;
  }

  /** Leaves or rejoins the create subjects by the count; resolves once the server has a rejoin. */
  private async recount(): Promise<void> {
    const served = this.served;
    if (!served) return;
    const { MAX_SESSIONS } = this.deps.config;
    if (!this.full && this.size >= MAX_SESSIONS) {
      this.full = true;
      for (const s of this.deps.createSubjects) served.pause(s);
      this.deps.log.warn(
        { code: 'AT_CAPACITY', sessions: this.size },
        'at capacity: no longer taking new sessions',
      );
    } else if (this.full && this.size < MAX_SESSIONS) {
      this.full = false;
      this.deps.log.info({ sessions: this.size }, 'taking new sessions again');
      await Promise.all(this.deps.createSubjects.map((s) => served.resume(s)));
    }
  }

  /** Runs `start` (a session start) for `caller`: the session it opens counts against that caller's quota. */
  asCaller<T>(caller: string | undefined, start: () => Promise<T>): Promise<T> {
    return caller === undefined ? start() : this.callerScope.run(caller, start);
  }

  /** Sessions a caller holds here, starts under way included. */
  private heldBy(caller: string): number {
    let n = this.reservedBy.get(caller) ?? 0;
    for (const s of this.sessions.values()) if (s.caller === caller && !s.released) n++;
    return n;
  }

  /**
   * Opens a session: takes a slot (or answers 503 when there is none, 429 when its caller holds its quota),
   * records it as a test session, and runs the transport's `start`. A start that fails is undone by the same
   * stop as any other session.
   */
  async open<R>(
    opts: OpenOptions,
    start: (ctx: SessionContext) => Promise<Started<R>>,
  ): Promise<{ key: string; result: R }> {
    if (this.size >= this.deps.config.MAX_SESSIONS) {
      throw new AppError('CAPACITY_EXHAUSTED', 'playground at capacity, retry shortly');
    }
    const caller = this.callerScope.getStore();
    const quota = this.deps.config.MAX_SESSIONS_PER_CALLER ?? 0;
    const overQuota = () =>
      new AppError(
        'RATE_LIMITED',
        `at most ${quota} sessions may be open at once per caller: end one (DELETE it) or wait for one to end`,
      );
    // this instance's own count first (no round trip), then the caller's slots across every instance
    if (caller !== undefined && quota > 0 && this.heldBy(caller) >= quota) throw overQuota();
    this.reserved++;
    if (caller !== undefined) this.reservedBy.set(caller, (this.reservedBy.get(caller) ?? 0) + 1);
    void this.recount();
    let hosted: Hosted;
    let slot: CallerSlot | false | undefined;
    try {
      if (caller !== undefined && quota > 0) slot = await this.deps.slots?.take(caller, opts.requestId);
      if (slot === false) throw overQuota();
      hosted = await this.register(opts, caller);
      hosted.slot = slot;
    } catch (err) {
      if (slot) await slot.release();
      throw err;
    } finally {
      this.reserved--;
      if (caller !== undefined) {
        const left = (this.reservedBy.get(caller) ?? 1) - 1;
        if (left <= 0) this.reservedBy.delete(caller);
        else this.reservedBy.set(caller, left);
      }
      void this.recount();
    }
    const { key } = hosted;
    try {
      // the session's tasks (LiveKit's included) inherit this context: their lines name the session
      const started = await inSession(
        { sessionKey: key, agentId: opts.agentId, requestId: opts.requestId },
        () => start(this.contextOf(hosted)),
      );
      // a flow that ends in its greeting has ended, not failed: its answer says `ended: true`
      if (hosted.stopping && hosted.stopReason !== 'end step')
        throw new AppError('UPSTREAM_FAILED', 'the session ended while it started');
      hosted.turn = started.turn;
      if (!hosted.stopping) this.touch(hosted);
      hosted.log.info({ sessionType: opts.sessionType }, 'session started');
      this.countFailure(hosted, started.result);
      return { key, result: hosted.redactor.deep(started.result) };
    } catch (err) {
      hosted.log.warn(
        { code: 'SESSION_START_FAILED', err: safeError(err) },
        'session failed to start; cleaning up',
      );
      await this.stop(key, 'failed start');
      if (err instanceof AppError) throw redactedError(hosted.redactor, err);
      throw new AppError('UPSTREAM_FAILED', opts.failure, { cause: err });
    }
  }

  private async register(opts: OpenOptions, caller: string | undefined): Promise<Hosted> {
    const { bus, config } = this.deps;
    let recorder: Recorder | undefined;
    let events: SessionEvents | undefined;
    let key = opts.key;
    const redactor = opts.redactor ?? new Redactor([]);
    if (opts.agentId) {
      const ts = await bus.request(
        Subjects.testSessionsCreate,
        {
          agentId: opts.agentId,
          session: {
            sessionType: opts.sessionType,
            version: opts.version ?? null,
            ...(opts.roomName ? { roomName: opts.roomName } : {}),
          },
        },
        { timeoutMs: config.BUS_TIMEOUT_MS, requestId: opts.requestId },
      );
      key ??= ts.id;
      recorder = new Recorder({
        bus,
        agentId: opts.agentId,
        sessionId: ts.id,
        startedAt: ts.startedAt,
        log: this.deps.log,
        timeoutMs: config.BUS_TIMEOUT_MS,
        redactor,
      });
      events = new SessionEvents(this.deps.nc, opts.agentId, ts.id, this.deps.log);
      events.emit({ type: 'session_started', sessionType: opts.sessionType, version: opts.version ?? null });
    }
    if (key === undefined) throw new Error('a session needs a key or a test session');
    const log = redactor.logger(this.deps.log, { sessionKey: key, agentId: opts.agentId });
    const hosted: Hosted = {
      key,
      caller,
      sessionType: opts.sessionType,
      agentId: opts.agentId,
      startedAt: Date.now(),
      log,
      redactor,
      releaseSecrets: secretsInPlay.hold(redactor),
      recorder,
      audio:
        recorder && events && this.deps.recordings && opts.recordAudio !== false
          ? new AudioRecording({
              ...this.deps.recordings,
              bus,
              agentId: recorder.agentId,
              sessionId: recorder.sessionId,
              emit: (event) => events.emit(event),
              log,
              timeoutMs: config.BUS_TIMEOUT_MS,
            })
          : undefined,
      events,
      usage: undefined,
      recordClosed: undefined,
      durationMs: undefined,
      stopReason: undefined,
      failedTurns: 0,
      cleanups: [],
      turn: undefined,
      subs: [],
      live: recorder ? this.serveLive(recorder.sessionId) : undefined,
      timers: new Map(),
      stopping: undefined,
      released: false,
      startedIn: trace.getSpanContext(context.active()),
    };
    this.sessions.set(key, hosted);
    hosted.subs.push(this.serveOwner(hosted, 'end'));
    if (opts.sessionType === 'text') hosted.subs.push(this.serveOwner(hosted, 'turn'));
    this.timer(hosted, 'max', config.MAX_SESSION_MS, 'maximum session length');
    return hosted;
  }

  private contextOf(hosted: Hosted): SessionContext {
    return {
      key: hosted.key,
      log: hosted.log,
      recorder: hosted.recorder,
      recordAudio: async (session) => {
        if (!hosted.stopping) await hosted.audio?.begin(session);
      },
      emit: (event) => {
        if (event.type === 'turn_metrics') observeTurn(hosted.sessionType, event.metrics);
        hosted.events?.emit(hosted.redactor.deep(event));
      },
      lastEventId: () => hosted.events?.lastId ?? 0,
      usageFrom: (read) => {
        hosted.usage = read;
      },
      closeRecord: () => this.closeRecord(hosted),
      onStop: (cleanup) => {
        if (hosted.stopping) void this.runCleanup(hosted, cleanup);
        else hosted.cleanups.push(cleanup);
      },
      stop: (reason) => void this.stop(hosted.key, reason),
      stopAfter: (ms, reason) => this.timer(hosted, 'stop-after', ms, reason),
      cancelStop: () => clearTimeout(hosted.timers.get('stop-after')),
      answerOwner: (verb, schema, handler) => {
        const { nc, log } = this.deps;
        hosted.subs.push(
          nc.subscribe(ownerSubject(hosted.key, verb), {
            callback: (_e, msg) =>
              void answer({
                nc,
                msg,
                log,
                subject: msg.subject,
                schema,
                handler: (req, ctx) => handler(req as z.output<typeof schema>, ctx.requestId),
              }),
          }),
        );
      },
    };
  }

  private countFailure(hosted: Hosted, result: unknown): void {
    if ((result as Partial<TurnResult> | undefined)?.error) hosted.failedTurns++;
  }

  /** The record closes with what the session used and the errors it saw (the stats count them). */
  private closeRecord(hosted: Hosted): Promise<void> {
    // once: a conversation's goodbye closes it, and the stop that follows must not report its usage again
    hosted.recordClosed ??= this.closeRecordOnce(hosted);
    return hosted.recordClosed;
  }

  private async closeRecordOnce(hosted: Hosted): Promise<void> {
    let usage: SessionUsage = [];
    try {
      usage = hosted.usage?.() ?? [];
    } catch (err) {
      hosted.log.warn({ code: 'SESSION_USAGE_NOT_READ', err: safeError(err) }, 'session usage not read');
    }
    if (usage.length > 0) hosted.events?.emit({ type: 'usage', usage });
    hosted.durationMs = await hosted.recorder?.close({
      usage,
      errors: hosted.events?.errors ?? 0,
      ...(hosted.failedTurns > 0 ? { failedTurns: hosted.failedTurns } : {}),
    });
  }

  /** A session's event streams ask here whether it still runs (no responders: its instance is gone). */
  private serveLive(sessionId: string): Subscription {
    return this.deps.nc.subscribe(liveSubject(sessionId), {
      callback: (_e, msg) => void msg.respond(),
    });
  }

  /** The subject only this instance holds for the session: requests that reached another one come here. */
  private serveOwner(hosted: Hosted, verb: 'turn' | 'end'): Subscription {
    const { nc, log } = this.deps;
    return nc.subscribe(ownerSubject(hosted.key, verb), {
      callback: (_e, msg) =>
        void (verb === 'turn'
          ? answer({
              nc,
              msg,
              log,
              subject: msg.subject,
              schema: TextTurnRequest,
              handler: (req, ctx) => this.turn({ ...req, requestId: ctx.requestId }),
            })
          : answer({
              nc,
              msg,
              log,
              subject: msg.subject,
              schema: OwnerEndRequest,
              handler: async (req, ctx) => {
                await this.end(req.key, req.agentId, ctx.requestId, req.reason);
                return { ok: true } satisfies Ok;
              },
            })),
    });
  }

  private timer(hosted: Hosted, name: string, ms: number, reason: string): void {
    clearTimeout(hosted.timers.get(name));
    const t = setTimeout(() => void this.stop(hosted.key, reason), ms);
    t.unref();
    hosted.timers.set(name, t);
  }

  private touch(hosted: Hosted): void {
    if (hosted.sessionType === 'text') {
      this.timer(hosted, 'idle', this.deps.config.TEXT_SESSION_IDLE_MS, 'idle');
    }
  }

  /** A user turn of a text session, here or at its owner. */
  async turn(req: UserTurn): Promise<TextTurnResult> {
    const { sessionId: key, agentId, text, requestId } = req;
    const hosted = this.sessions.get(key);
    if (!hosted) {
      return this.deps.bus.requestTo<TextTurnResult>(
        ownerSubject(key, 'turn'),
        { agentId, sessionId: key, text },
        { timeoutMs: FORWARDED_TURN_TIMEOUT_MS, requestId, onNoResponders: notFound(key) },
      );
    }
    if (hosted.agentId !== agentId || !hosted.turn || hosted.stopping) throw notFound(key);
    this.touch(hosted);
    const span = trace.getActiveSpan();
    if (hosted.startedIn && span?.isRecording()) span.addLink({ context: hosted.startedIn });
    const run = hosted.turn;
    try {
      // what LiveKit logs during the turn names the session and the request
      const result = await inSession({ sessionKey: key, agentId, requestId }, () => run(text));
      this.countFailure(hosted, result);
      return { sessionId: key, ...hosted.redactor.deep(result) };
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
    key: string,
    agentId: string | undefined,
    requestId: string,
    reason = 'delete',
  ): Promise<boolean> {
    const hosted = this.sessions.get(key);
    if (hosted) {
      if (agentId !== undefined && hosted.agentId !== agentId) return true;
      await this.stop(key, reason);
      return true;
    }
    const { config } = this.deps;
    try {
      await this.deps.bus.requestTo<Ok>(
        ownerSubject(key, 'end'),
        { key, agentId, reason },
        {
          timeoutMs: config.BUS_TIMEOUT_MS + config.MEDIA_SERVER_TIMEOUT_MS,
          requestId,
          onNoResponders: new AppError('NOT_FOUND', 'no owner'),
        },
      );
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === 'NOT_FOUND') return false;
      throw err;
    }
  }

  /** The one way a session ends. Idempotent: a second call waits for the first. */
  stop(key: string, reason: string): Promise<void> {
    const hosted = this.sessions.get(key);
    if (!hosted) return Promise.resolve();
    hosted.stopReason ??= reason;
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
        await this.recount();
        await hosted.events?.emitLast({
          type: 'session_ended',
          reason,
          durationMs: hosted.durationMs ?? Date.now() - hosted.startedAt,
        });
      } finally {
        // after the last event is stored: a stream that finds no one here finds the session_ended
        hosted.live?.unsubscribe();
        this.sessions.delete(key);
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

  private async runCleanup(hosted: Hosted, cleanup: () => Promise<void>): Promise<void> {
    await cleanup().catch((err: unknown) =>
      hosted.log.warn({ code: 'SESSION_CLEANUP_FAILED', err: safeError(err) }, 'session cleanup failed'),
    );
  }

  async stopAll(reason: string): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((key) => this.stop(key, reason)));
  }
}
