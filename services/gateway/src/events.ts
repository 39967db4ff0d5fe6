import {
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  isJetStreamError,
  isNoResponders,
  JetStreamApiCodes,
  safeError,
  type BusClient,
  type Logger,
} from '@vab/bus';
import {
  AppError,
  EVENTS_STREAM,
  eventsSubject,
  LastEventId,
  liveSubject,
  Subjects,
  type SessionEvent,
  type TextTurnResult,
} from '@vab/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { SessionFeed, type FeedReader } from './session-feed.js';
import { callerOf } from './security.js';

export interface EventStreamSettings {
  /** A comment line this often keeps proxies from closing an idle stream; the owner is checked as often. */
  heartbeatMs: number;
  /** Open streams per client address at once (429 past it). */
  maxStreamsPerClient: number;
  /** Bytes a client may leave unread before it is cut off: a slow reader never holds events back. */
  maxBufferBytes: number;
  /** Bound on asking whether a session's instance still runs it. */
  ownerProbeTimeoutMs: number;
  /** Bound on the first event of a streamed turn's end reaching us after its answer. */
  turnDrainMs: number;
  /**
   * Bytes of a session's latest events kept in memory while it has readers on this gateway: a reader that
   * joins later replays from them; one that needs older events gets a consumer of its own.
   */
  feedBufferBytes: number;
}

export const DEFAULT_EVENT_STREAMS: EventStreamSettings = {
  heartbeatMs: 15_000,
  maxStreamsPerClient: 20,
  maxBufferBytes: 1024 * 1024,
  ownerProbeTimeoutMs: 2_000,
  turnDrainMs: 2_000,
  feedBufferBytes: 256 * 1024,
};

/** Where a stream starts: after this event id (0 = from the first). */
export function lastEventIdOf(req: FastifyRequest, query: { lastEventId?: string | undefined }): number {
  const header = req.headers['last-event-id'];
  const raw = typeof header === 'string' ? header : query.lastEventId;
  if (raw === undefined || raw === '') return 0;
  const parsed = LastEventId.safeParse(raw.trim());
  if (!parsed.success) {
    throw new AppError('VALIDATION_FAILED', 'Last-Event-ID must be a non-negative integer event id', {
      issues: [{ path: 'headers.last-event-id', message: 'must be a non-negative integer event id' }],
    });
  }
  return parsed.data;
}

/**
 * Whose events a stream reads: a test session's, or a call's (`call`: the call's id is its session's, and its
 * record is the call's).
 */
export interface EventsTarget {
  agentId: string;
  sessionId: string;
  call?: boolean;
}

/** One SSE frame. */
const frame = (event: SessionEvent) =>
  `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
const errorFrame = (code: string, message: string) =>
  `event: error\ndata: ${JSON.stringify({ code, message })}\n\n`;

/** Why a stream of a session nobody runs ends: it never had events, or its instance went away. */
const lostMessage = (sent: number) =>
  sent === 0
    ? 'no playground instance runs this session, and it has no events'
    : 'the instance running this session is gone; the session has ended';

/** A hijacked reply as a Server-Sent Events stream: our headers (CORS, request id, security) kept. */
function startStream(reply: FastifyReply): void {
  reply.hijack();
  const headers: Record<string, string | number | string[]> = {};
  for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) headers[k] = v;
  reply.raw.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    // nginx and its kind would otherwise buffer the stream
    'x-accel-buffering': 'no',
    // a stream holds its connection to the end: none is left half-used for a shutdown to wait on
    connection: 'close',
  });
  reply.raw.flushHeaders();
}

/**
 * Session events for HTTP clients, from the JetStream stream the playground writes them to: any gateway
 * serves any session, a reconnect resumes after its Last-Event-ID (the per-session event id), a finished
 * session's stream is read back whole. Each open stream is one ordered consumer over that session's subject.
 */
export class EventStreams {
  private readonly js: JetStreamClient;
  private jsm: Promise<JetStreamManager> | undefined;
  private readonly perClient = new Map<string, number>();
  private readonly open = new Set<(closing?: string) => void>();
  /** Each session's shared feed on this gateway, by its events subject. */
  private readonly feeds = new Map<string, SessionFeed>();

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      bus: BusClient;
      log: Logger;
      settings: EventStreamSettings;
      requestTimeoutMs: number;
    },
  ) {
    this.js = jetstream(deps.nc);
  }

  private manager(): Promise<JetStreamManager> {
    this.jsm ??= jetstreamManager(this.deps.nc).catch((err: unknown) => {
      this.jsm = undefined;
      throw err;
    });
    return this.jsm;
  }

  /** Ends every open stream (a gateway that stops): clients reconnect elsewhere with their Last-Event-ID. */
  closeAll(): void {
    // a frame that says why, not a cut stream: the client reconnects (another gateway, or this one restarted)
    // from its last event
    const closing = errorFrame(
      'SERVICE_UNAVAILABLE',
      'this gateway is stopping: reconnect with Last-Event-ID to go on from the last event',
    );
    for (const end of [...this.open]) end(closing);
  }

  /** The last stored event of a session: its id and stream sequence, or none. */
  private async lastStored(subject: string): Promise<{ id: number; seq: number } | undefined> {
    try {
      const msg = await (await this.manager()).streams.getMessage(EVENTS_STREAM, { last_by_subj: subject });
      if (!msg) return undefined;
      return { id: msg.json<SessionEvent>().id, seq: msg.seq };
    } catch (err) {
      if (isJetStreamError(err, JetStreamApiCodes.StreamNotFound, JetStreamApiCodes.NoMessageFound)) {
        return undefined;
      }
      throw err;
    }
  }

  private async consume(
    subject: string,
    afterSeq: number | undefined,
  ): Promise<ConsumerMessages | undefined> {
    try {
      const consumer = await this.js.consumers.get(EVENTS_STREAM, {
        filter_subjects: subject,
        ...(afterSeq === undefined
          ? { deliver_policy: DeliverPolicy.All }
          : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: afterSeq + 1 }),
      });
      const messages = await consumer.consume({ max_messages: 256 });
      // an ordered consumer outlives its reader on the server (5 minutes idle, fixed by nats.js): removed
      // as soon as its reader stops, or every reconnect of a browser would leave one behind
      void messages
        .closed()
        .catch(() => undefined)
        .then(() => consumer.delete())
        .catch(() => undefined);
      return messages;
    } catch (err) {
      // no stream yet: no playground instance has run a session since JetStream was set up
      if (isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) return undefined;
      throw err;
    }
  }

  /** Whether the instance that runs the session still answers for it. */
  private async ownerAlive(sessionId: string): Promise<boolean> {
    try {
      await this.deps.nc.request(liveSubject(sessionId), undefined, {
        timeout: this.deps.settings.ownerProbeTimeoutMs,
      });
      return true;
    } catch (err) {
      if (isNoResponders(err)) return false;
      // a timeout is not proof of death: asked again at the next heartbeat
      return true;
    }
  }

  /** Writes a frame; false (the connection is gone) when the client has left too much unread. */
  private keepsUp(res: ServerResponse, chunk: string, requestId: string, sessionId: string): boolean {
    res.write(chunk);
    if (res.writableLength <= this.deps.settings.maxBufferBytes) return true;
    this.deps.log.warn(
      { code: 'EVENT_STREAM_CUT_OFF', requestId, sessionId, buffered: res.writableLength },
      'slow event stream cut off',
    );
    res.destroy();
    return false;
  }

  /**
   * A stream with nothing new: its session still runs (`alive`), ended without events of its own (`closed`: a
   * session a client recorded), or its instance is gone without ending it (`lost`).
   */
  private async ownerState(
    target: EventsTarget,
    sent: number,
    requestId: string,
  ): Promise<'alive' | 'closed' | 'lost'> {
    if (await this.ownerAlive(target.sessionId)) return 'alive';
    // the owner stores its last event before it stops answering: anything newer is on its way
    const newest = await this.lastStored(eventsSubject(target.agentId, target.sessionId)).catch(
      () => undefined,
    );
    if (newest && newest.id > sent) return 'alive';
    const closed = await this.closedRecord(target, requestId).catch(() => false);
    return closed ? 'closed' : 'lost';
  }

  /**
   * Whether the stream's record (a test session's, or a call's: issue 45) has ended; NOT_FOUND for none of
   * this agent's.
   */
  private async closedRecord(target: EventsTarget, requestId: string): Promise<boolean> {
    const { agentId, sessionId } = target;
    const ask = { timeoutMs: this.deps.requestTimeoutMs, requestId };
    if (target.call) {
      const call = await this.deps.bus.request(Subjects.callsGet, { agentId, callId: sessionId }, ask);
      return call.status === 'ended';
    }
    const session = await this.deps.bus.request(Subjects.testSessionsGet, { agentId, sessionId }, ask);
    return session.status === 'closed';
  }

  private takeSlot(req: FastifyRequest, reply: FastifyReply): () => void {
    // per caller: a token's identity (a ticket carries its maker's), else the address
    const client = callerOf(req);
    const n = this.perClient.get(client) ?? 0;
    const { maxStreamsPerClient, heartbeatMs } = this.deps.settings;
    if (n >= maxStreamsPerClient) {
      reply.header('retry-after', String(Math.ceil(heartbeatMs / 1000)));
      throw new AppError(
        'RATE_LIMITED',
        `at most ${maxStreamsPerClient} event streams may be open at once per caller`,
      );
    }
    this.perClient.set(client, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.perClient.get(client) ?? 1) - 1;
      if (left <= 0) this.perClient.delete(client);
      else this.perClient.set(client, left);
    };
  }

  /**
   * The feed a reader that has every event up to `after` reads from: this gateway's shared one for the
   * session when it reaches back far enough, else a new one (shared when the session has none).
   */
  private feedFor(
    target: EventsTarget,
    requestId: string,
    start: { after: number; last: { id: number; seq: number } | undefined },
  ): SessionFeed {
    const subject = eventsSubject(target.agentId, target.sessionId);
    const shared = this.feeds.get(subject);
    if (shared?.covers(start.after)) return shared;
    const { after, last } = start;
    const atLiveEdge = last === undefined || after === last.id;
    const fromSeq = after > 0 && after === last?.id ? last.seq : undefined;
    const feed: SessionFeed = new SessionFeed(() => this.consume(subject, fromSeq), {
      sessionId: target.sessionId,
      base: fromSeq === undefined ? 0 : after,
      atLiveEdge,
      bufferBytes: this.deps.settings.feedBufferBytes,
      checkEveryMs: this.deps.settings.heartbeatMs,
      ownerState: (lastId) => this.ownerState(target, lastId, requestId),
      lostFrame: (lastId) => errorFrame('SESSION_LOST', lostMessage(lastId)),
      log: this.deps.log,
      onClose: () => {
        if (this.feeds.get(subject) === feed) this.feeds.delete(subject);
      },
    });
    // one that reaches back further than the shared one is this reader's own
    if (!shared) this.feeds.set(subject, feed);
    return feed;
  }

  /**
   * `GET …/test-sessions/:sessionId/events`: 404 for an unknown session (or one of another agent) before any
   * stream starts; then every event after `after`, live ones as they come, until `session_ended`.
   */
  async serve(
    req: FastifyRequest,
    reply: FastifyReply,
    target: EventsTarget & { after: number },
  ): Promise<void> {
    const { settings } = this.deps;
    const { agentId, sessionId } = target;
    const requestId = String(req.id);
    await this.closedRecord(target, requestId);
    const release = this.takeSlot(req, reply);
    const res = reply.raw;
    // a client that leaves while its stream is set up (a socket destroyed or half-closed right after its
    // request) frees its slot then, not when the session ends: the stream's own close listener comes later
    let left = false;
    const leave = () => {
      left = true;
      release();
    };
    res.once('close', leave);
    let feed: SessionFeed;
    // an id past the last event: from the live edge
    let after = target.after;
    try {
      const last = await this.lastStored(eventsSubject(agentId, sessionId));
      after = Math.min(target.after, last?.id ?? 0);
      feed = this.feedFor(target, requestId, { after, last });
      await feed.ready;
      // it ended while this one waited for it (its session's last event came): a fresh one replays it all
      if (feed.isClosed()) {
        feed = this.feedFor(target, requestId, { after, last });
        await feed.ready;
      }
    } catch (err) {
      res.off('close', leave);
      release();
      throw err;
    }
    res.off('close', leave);
    if (left || res.destroyed) {
      release();
      // nobody reads it: a feed made for this reader alone stops
      feed.dropIfUnread();
      reply.hijack();
      res.destroy();
      return;
    }
    startStream(reply);
    let sent = after;
    let ended = false;
    const reader: FeedReader = {
      push: (id, chunk) => {
        if (id <= sent || ended) return;
        sent = id;
        write(chunk);
      },
      finish: (closing) => end(closing),
    };
    const end = (closing?: string) => {
      if (ended) return;
      ended = true;
      clearInterval(beat);
      this.open.delete(end);
      release();
      feed.detach(reader);
      if (closing && res.writable) res.write(closing);
      res.end();
      // the connection goes with the stream (a client still reading a cancelled body would keep it)
      res.socket?.destroySoon();
    };
    this.open.add(end);
    const write = (chunk: string) => {
      if (!this.keepsUp(res, chunk, requestId, sessionId)) end();
    };
    const beat = setInterval(() => write(': ping\n\n'), settings.heartbeatMs);
    beat.unref();
    res.on('close', () => end());
    feed.attach(reader, after);
  }

  /**
   * A session's events from its first, then live, for another kind of stream (the voice socket): the same
   * shared feed as `serve`. Resolves once following; the returned function stops.
   */
  async follow(
    target: { agentId: string; sessionId: string },
    reader: FeedReader,
    requestId: string,
    /** The events up to this id are not sent (a resumed client had them). */
    after = 0,
  ): Promise<() => void> {
    const last = await this.lastStored(eventsSubject(target.agentId, target.sessionId));
    let feed = this.feedFor(target, requestId, { after: 0, last });
    await feed.ready;
    if (feed.isClosed()) {
      feed = this.feedFor(target, requestId, { after: 0, last });
      await feed.ready;
    }
    feed.attach(reader, after);
    return () => feed.detach(reader);
  }

  /**
   * `POST …/turns` with `Accept: text/event-stream`: the turn's events as they happen, then `result` (the JSON
   * form's answer). Until its first event the turn can still be refused like the JSON form (same status and
   * body); after it, a failure is an `error` event.
   */
  async streamTurn(
    req: FastifyRequest,
    reply: FastifyReply,
    target: { agentId: string; sessionId: string },
    send: () => Promise<TextTurnResult>,
  ): Promise<void> {
    const { log, settings } = this.deps;
    const subject = eventsSubject(target.agentId, target.sessionId);
    const last = await this.lastStored(subject);
    const messages = await this.consume(subject, last?.seq);
    const res = reply.raw;
    let started = false;
    let sent = last?.id ?? 0;
    const begin = () => {
      if (started) return;
      started = true;
      startStream(reply);
    };
    const answer = send();
    answer.catch(() => undefined);
    try {
      const reader = messages?.[Symbol.asyncIterator]();
      const next = () => reader?.next() ?? new Promise<never>(() => undefined);
      let pending = next();
      let result: TextTurnResult | undefined;
      // until the answer: every event as it comes
      while (result === undefined) {
        const got = await Promise.race([pending.then((m) => ({ m })), answer.then((r) => ({ r }))]);
        if ('r' in got) {
          result = got.r;
          break;
        }
        if (got.m.done) break;
        pending = next();
        const event = got.m.value.json<SessionEvent>();
        if (event.id <= sent) continue;
        begin();
        sent = event.id;
        res.write(frame(event));
      }
      result ??= await answer;
      begin();
      // the answer may overtake the turn's last events: they are waited for, briefly
      const deadline = Date.now() + settings.turnDrainMs;
      while (reader && sent < (result.lastEventId ?? 0) && Date.now() < deadline) {
        const got = await Promise.race([pending, sleep(deadline - Date.now())]);
        if (!got || got.done) break;
        pending = next();
        const event = got.value.json<SessionEvent>();
        if (event.id <= sent) continue;
        sent = event.id;
        res.write(frame(event));
      }
      res.end(`event: result\ndata: ${JSON.stringify(result)}\n\n`);
    } catch (err) {
      if (!started) throw err;
      const e = err instanceof AppError ? err : new AppError('INTERNAL', 'the turn failed');
      if (!(err instanceof AppError))
        log.error({ err: safeError(err), requestId: String(req.id) }, 'streamed turn failed');
      res.end(errorFrame(e.code, e.message));
    } finally {
      await messages?.close().catch(() => undefined);
    }
  }
}

const sleep = (ms: number) => new Promise<undefined>((r) => setTimeout(() => r(undefined), Math.max(0, ms)));
