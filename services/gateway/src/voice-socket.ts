import { headers as natsHeaders, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { type BusClient, isNoResponders, type Logger, safeError } from '@vab/bus';
import {
  AppError,
  liveSubject,
  ownerSubject,
  Subjects,
  TestSessionParams,
  type MediaRefusalKind,
  type SessionEventType,
  VOICE_CONTROL_HEADER,
  VoiceAttached,
  VoiceClientMessage,
  VoiceCloseCodes,
  voiceInSubject,
  voiceOutSubject,
  voiceRelaySubject,
  VoiceResumeToken,
} from '@vab/contracts';
import { closeSocket } from '@vab/service-kit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { EventStreams } from './events.js';

export interface VoiceSocketSettings {
  /** The agent's audio a client may leave unread before the socket is closed (a client that stopped reading). */
  maxBufferedBytes: number;
  /** How far ahead of real time a client's audio may run (network jitter) before it is refused. */
  burstMs: number;
  /** Bound on attaching to the session's owner. */
  attachTimeoutMs: number;
  /**
   * JSON messages a client may send a second, on average, and at once (a token bucket): a correct client sends
   * one `playback_finished` per `playback_flush` or `playback_clear` of the agent's, and one `end`; audio is
   * bounded by its pace, these only by this.
   */
  controlPerSecond: number;
  controlBurst: number;
  /**
   * How often the relay asks whether the session's instance is alive (`playground.live.<id>`); two answers of
   * "no one there" in a row close the socket 4503: a killed instance's caller knows within about twice this.
   */
  ownerCheckMs: number;
}

export const DEFAULT_VOICE_SOCKET: VoiceSocketSettings = {
  maxBufferedBytes: 1024 * 1024,
  burstMs: 2000,
  attachTimeoutMs: 5000,
  controlPerSecond: 10,
  controlBurst: 50,
  ownerCheckMs: 1000,
};
/** How long a socket closed for a flood of messages is kept (unread) for its close frame to reach the client. */
const FLOOD_CLOSE_GRACE_MS = 1000;

/** The bytes that came after an upgrade request's headers (kept by our upgrade listener for `ws`). */
const kHead = Symbol('voice-upgrade-head');
type UpgradeRequest = IncomingMessage & { [kHead]?: Buffer };

/**
 * Upgrades reach the router (and with it the edge's hooks: tokens, tickets, rate limits) as requests. With
 * an upstream the proxy's listener does this for every upgrade; without one, this listener does, as the
 * proxy and @fastify/websocket do: both cannot listen, each would answer every upgrade. An upgrade refused
 * with an HTTP answer (401, 404, 429) is then ended with it, not left half-open to hold the server's close.
 */
function routeUpgrades(app: FastifyInstance, log: Logger): void {
  app.server.on('upgrade', (rawRequest: UpgradeRequest, socket: Duplex, head: Buffer) => {
    socket.once('end', () => socket.destroy());
    try {
      rawRequest[kHead] = head;
      const response = new ServerResponse(rawRequest);
      response.assignSocket(socket as Socket);
      response.on('finish', () => socket.destroy());
      app.routing(rawRequest, response);
    } catch (err) {
      log.error({ code: 'UPGRADE_FAILED', err: safeError(err) }, 'upgrade failed');
      socket.destroy();
    }
  });
}

/**
 * `GET /api/agents/:id/voice-sessions/:sessionId/audio`, a WebSocket (authenticated like the event stream:
 * bearer token or a ticket, by the edge's hooks before the upgrade): binary messages are 16-bit mono PCM in
 * both directions, JSON messages are control and the session's events. The gateway only relays and checks:
 * frame size, pace (no faster than real time beyond a burst), the client's reading, its messages' shape; the
 * audio reaches the session's owner over the bus, so any gateway serves any session.
 */
export function registerVoiceSocket(
  app: FastifyInstance,
  deps: {
    nc: NatsConnection | undefined;
    bus: BusClient | undefined;
    streams: EventStreams | undefined;
    log: Logger;
    settings: VoiceSocketSettings;
    /** An upstream proxy routes every upgrade itself. */
    upstream: boolean;
  },
): RelayVoice {
  if (!deps.upstream) routeUpgrades(app, deps.log);
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  const relay: RelayVoice = (req, reply, target) => {
    if (req.headers.upgrade?.toLowerCase() !== 'websocket') {
      throw new AppError('VALIDATION_FAILED', 'this path is a WebSocket: open it with an upgrade');
    }
    const { nc, bus, log } = deps;
    reply.hijack();
    const raw = req.raw as UpgradeRequest;
    const requestId = String(req.id);
    // one connection's failure ends that connection, never the process
    const failed = (err: unknown) =>
      log.error({ code: 'VOICE_RELAY_FAILED', requestId, err: safeError(err) }, 'voice relay failed');
    try {
      wss.handleUpgrade(raw, raw.socket, raw[kHead] ?? Buffer.alloc(0), (socket) => {
        if (!nc || !bus) {
          socket.close(VoiceCloseCodes.lost, 'this gateway has no bus');
          return;
        }
        try {
          new VoiceRelay({ ...deps, ...target, nc, bus, socket, requestId }).open();
        } catch (err) {
          failed(err);
          socket.close(VoiceCloseCodes.internal, 'the gateway failed relaying this socket');
        }
      });
    } catch (err) {
      failed(err);
      raw.socket.destroy();
    }
  };
  app.get(
    '/api/agents/:id/voice-sessions/:sessionId/audio',
    // the ids are checked (400) before anything is done with them: they go into subjects
    { schema: { hide: true, params: TestSessionParams } },
    (req, reply) => {
      const { id: agentId, sessionId } = req.params as TestSessionParams;
      relay(req, reply, { agentId, sessionId, resume: resumeOf(req) });
    },
  );
  return relay;
}

/**
 * The `resume` query parameter of a socket's upgrade: a dropped client's token (its last `ready`'s), checked by
 * the session's owner; a value that is not one is refused here (400).
 */
export function resumeOf(req: FastifyRequest): VoiceResumeToken | undefined {
  const value = (req.query as Record<string, unknown> | undefined)?.resume;
  if (value === undefined) return undefined;
  const parsed = VoiceResumeToken.safeParse(value);
  if (!parsed.success) throw new AppError('VALIDATION_FAILED', '`resume` is not a resume token');
  return parsed.data;
}

/** Which session a socket is relayed to, and how its end is asked for (a call's: `playground.calls.end`). */
export interface RelayTarget {
  agentId: string;
  sessionId: string;
  /** A dropped client takes its session back (docs/api.md › Resuming a voice socket). */
  resume?: VoiceResumeToken | undefined;
  /**
   * Ends the session when the socket goes; default: `playground.voice.end` with the close's reason. `refusal`:
   * why the gateway closed it, when it did for what the client sent (a call's `endedDetail.kind`).
   */
  end?:
    | ((
        reason: string | undefined,
        requestId: string,
        refusal?: MediaRefusalKind | undefined,
      ) => Promise<unknown>)
    | undefined;
  /**
   * The session's events the client is sent (their `type`), when not all: a public call's caller gets what a
   * talk page shows (`PUBLIC_CALL_EVENT_TYPES`), never the builder's tool calls, results or figures.
   */
  events?: ReadonlySet<SessionEventType> | undefined;
}

/** Upgrades a request to the voice protocol's socket, relayed to `target` (already authorised by its route). */
export type RelayVoice = (req: FastifyRequest, reply: FastifyReply, target: RelayTarget) => void;

/** One client's socket, relayed to and from its session's owner. */
class VoiceRelay {
  private readonly connectionId = randomUUID().replaceAll('-', '');
  private readonly inSubject: string;
  private readonly outSubject: string;
  private out: Subscription | undefined;
  /** Answers the owner's "are you there" (`voice-relay.<connectionId>`): gone with this gateway. */
  private presence: Subscription | undefined;
  private stopEvents: (() => void) | undefined;
  private ownerCheck: NodeJS.Timeout | undefined;
  /** Probes in a row that found no instance holding the session. */
  private ownerMisses = 0;
  private format: VoiceAttached | undefined;
  private frameMs = 0;
  private firstFrameAt = 0;
  private sentMs = 0;
  /** The control-message bucket: how many may be sent now, and when it was last filled. */
  private controlTokens: number;
  private controlFilledAt = Date.now();
  /**
   * What reaches the client before the owner's `ready` (the session's first events, replayed as soon as it is
   * followed), held so that `ready` is the first message, as the protocol says; undefined once it was sent.
   */
  private held: { data: string | Uint8Array; bytes: number }[] | undefined = [];
  private heldBytes = 0;
  private closed = false;
  /** Why the gateway closed the socket, when it did: the session ends with it as `session_ended`'s reason. */
  private endReason: string | undefined;
  /** When that was for what the client sent: a call's `endedDetail.kind`. */
  private refusal: MediaRefusalKind | undefined;
  private readonly control = natsHeaders();

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      bus: BusClient;
      streams: EventStreams | undefined;
      log: Logger;
      settings: VoiceSocketSettings;
      socket: WebSocket;
      agentId: string;
      sessionId: string;
      requestId: string;
      end?: RelayTarget['end'];
      resume?: VoiceResumeToken | undefined;
      events?: RelayTarget['events'];
    },
  ) {
    this.control.set(VOICE_CONTROL_HEADER, '1');
    // the builders refuse what is not one subject token (the route's schema already did)
    this.inSubject = voiceInSubject(deps.sessionId);
    this.outSubject = voiceOutSubject(deps.sessionId);
    this.controlTokens = deps.settings.controlBurst;
  }

  /**
   * Attaches the socket to its session and relays until either side ends. Never rejects, never throws: what
   * goes wrong with one connection closes that connection (1011 when it is ours), never the process.
   */
  open(): void {
    const { socket } = this.deps;
    socket.on('message', (data: Buffer, isBinary: boolean) =>
      this.guarded(() => this.fromClient(data, isBinary)),
    );
    socket.on('close', () => void this.finish());
    // ws closes the socket after its error (a bad frame: 1002, 1007, 1009): the session ends with it
    socket.on('error', () => void this.finish());
    this.attach().catch((err: unknown) => this.failed(err));
  }

  private async attach(): Promise<void> {
    const { nc, sessionId, agentId, resume } = this.deps;
    try {
      this.presence = nc.subscribe(voiceRelaySubject(this.connectionId), {
        callback: (_e, msg) => {
          msg.respond();
        },
      });
      // before attaching: the owner's first messages (ready, the greeting's audio) must not be missed
      this.out = nc.subscribe(this.outSubject, {
        callback: (_e, msg) =>
          this.guarded(() => this.toClient(msg.data, msg.headers?.has(VOICE_CONTROL_HEADER) ?? false)),
      });
      const follow = (after: number) =>
        this.deps.streams?.follow(
          { agentId, sessionId },
          {
            // a feed still catching up pushes its older events to every reader: this one skips what it had
            push: (id, _frame, json) => {
              if (id > after) this.guarded(() => this.event(json));
            },
            finish: (closing) => this.guarded(() => this.ended(closing)),
          },
          this.deps.requestId,
          after,
        );
      // a resumed client had the events up to its drop: it is sent the ones after the owner's last at the resume
      if (resume === undefined) this.stopEvents = await follow(0);
      this.format = VoiceAttached.parse(
        await this.deps.bus.requestTo(
          ownerSubject(sessionId, 'attach'),
          {
            agentId,
            sessionId,
            connectionId: this.connectionId,
            relay: true,
            ...(resume ? { resume } : {}),
          },
          {
            timeoutMs: this.deps.settings.attachTimeoutMs,
            requestId: this.deps.requestId,
            onNoResponders: new AppError('NOT_FOUND', 'no voice session with this id is running'),
          },
        ),
      );
      if (resume !== undefined) {
        const stop = await follow(this.format.lastEventId ?? 0);
        // the client left meanwhile: release() ran before this reader existed
        if (this.closed) stop?.();
        else this.stopEvents = stop;
      }
      this.frameMs = (this.format.frameBytes / 2 / this.format.sampleRate) * 1000;
      if (!this.closed) this.watchOwner();
    } catch (err) {
      const e = err instanceof AppError ? err : undefined;
      const code =
        e?.code === 'NOT_FOUND'
          ? VoiceCloseCodes.notFound
          : e?.code === 'CONFLICT'
            ? VoiceCloseCodes.taken
            : e?.code === 'VALIDATION_FAILED'
              ? VoiceCloseCodes.badInput
              : e?.code === 'UNAUTHORIZED'
                ? VoiceCloseCodes.unauthorized
                : VoiceCloseCodes.lost;
      this.close(code, e?.message ?? 'the voice session could not be reached', false);
    } finally {
      // the client left while this socket was being attached: nothing of it may stay behind (and a session
      // attached meanwhile ends, as it would have on the close); a second release only unsubscribes again
      if (this.closed) await this.release(true);
    }
  }

  /**
   * The session's instance may die without a word (kill -9, a lost machine): its event stream notices only at
   * its heartbeat, so the relay asks itself, often. NATS answers "no responders" at once when no one holds
   * the session's live subject; a timeout proves nothing; one miss may be an instance reconnecting to NATS.
   */
  private watchOwner(): void {
    const { nc, sessionId, settings } = this.deps;
    this.ownerCheck = setInterval(() => {
      nc.request(liveSubject(sessionId), undefined, { timeout: settings.ownerCheckMs }).then(
        () => (this.ownerMisses = 0),
        (err: unknown) => {
          if (!isNoResponders(err)) return;
          if (++this.ownerMisses >= 2)
            this.close(VoiceCloseCodes.lost, 'the instance running the session is gone', false);
        },
      );
    }, settings.ownerCheckMs);
    this.ownerCheck.unref();
  }

  /** Runs one step of the relay; a failure of ours closes this socket (1011), and is logged as the bug it is. */
  private guarded(step: () => void): void {
    try {
      step();
    } catch (err) {
      this.failed(err);
    }
  }

  private failed(err: unknown): void {
    const { log, requestId, sessionId } = this.deps;
    log.error(
      { code: 'VOICE_RELAY_FAILED', requestId, sessionId, err: safeError(err) },
      'voice relay failed',
    );
    this.close(VoiceCloseCodes.internal, 'the gateway failed relaying this socket');
  }

  private fromClient(data: Buffer, isBinary: boolean): void {
    const format = this.format;
    if (!format || this.closed) return;
    const { nc } = this.deps;
    if (isBinary) {
      if (data.byteLength !== format.frameBytes) {
        this.refusal = 'bad_message';
        this.close(
          VoiceCloseCodes.badInput,
          `each binary message must be ${format.frameBytes} bytes (${this.frameMs} ms of 16-bit mono PCM at ${format.sampleRate} Hz)`,
        );
        return;
      }
      const now = Date.now();
      if (this.firstFrameAt === 0) this.firstFrameAt = now;
      this.sentMs += this.frameMs;
      if (this.sentMs > now - this.firstFrameAt + this.deps.settings.burstMs) {
        this.refusal = 'media_too_fast';
        this.close(VoiceCloseCodes.tooFast, 'audio faster than real time: send it as it is recorded');
        return;
      }
      nc.publish(this.inSubject, data);
      return;
    }
    // counted before it is parsed: a flood costs a subtraction per message until it is closed
    if (!this.takeControlToken()) {
      const { controlPerSecond, controlBurst } = this.deps.settings;
      this.close(
        VoiceCloseCodes.tooFast,
        `more than ${controlPerSecond} JSON messages a second (${controlBurst} at once)`,
      );
      // nothing more of it is read (parsing a flood that goes on after the close costs as much as serving it),
      // and the connection ends a moment after the close frame left, not at the close's 30 s timeout
      const { socket } = this.deps;
      socket.pause();
      setTimeout(() => socket.terminate(), FLOOD_CLOSE_GRACE_MS).unref();
      return;
    }
    let parsed: ReturnType<typeof VoiceClientMessage.safeParse> | undefined;
    try {
      parsed = VoiceClientMessage.safeParse(JSON.parse(data.toString('utf8')));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      this.refusal = 'bad_message';
      this.close(
        VoiceCloseCodes.badInput,
        'not a message of the voice protocol (docs/api.md › Voice sessions)',
      );
      return;
    }
    nc.publish(this.inSubject, JSON.stringify(parsed.data), { headers: this.control });
  }

  private takeControlToken(): boolean {
    const { controlPerSecond, controlBurst } = this.deps.settings;
    const now = Date.now();
    this.controlTokens = Math.min(
      controlBurst,
      this.controlTokens + ((now - this.controlFilledAt) * controlPerSecond) / 1000,
    );
    this.controlFilledAt = now;
    if (this.controlTokens < 1) return false;
    this.controlTokens -= 1;
    return true;
  }

  private toClient(data: Uint8Array, control: boolean): void {
    if (this.closed) return;
    const message = control ? Buffer.from(data).toString('utf8') : data;
    if (this.held && control && isReady(message as string)) {
      const held = this.held;
      this.held = undefined;
      this.send(message);
      for (const h of held) this.send(h.data);
      return;
    }
    this.send(message);
  }

  /** One of the session's events, its JSON as stored. */
  private event(json: string): void {
    if (this.closed) return;
    const only = this.deps.events;
    if (only && !only.has((JSON.parse(json) as { type: SessionEventType }).type)) return;
    this.send(`{"type":"event","event":${json}}`);
  }

  /** One message to the client (text or binary), or held until `ready` went first. */
  private send(data: string | Uint8Array): void {
    const { socket, settings } = this.deps;
    if (this.held) {
      const bytes = typeof data === 'string' ? data.length : data.byteLength;
      // a copy: a message's bytes are the bus's until its callback returns
      this.held.push({ data: typeof data === 'string' ? data : data.slice(), bytes });
      this.heldBytes += bytes;
      if (this.heldBytes > settings.maxBufferedBytes)
        this.close(VoiceCloseCodes.lost, 'the voice session did not become ready');
      return;
    }
    if (this.closed || socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount > settings.maxBufferedBytes) {
      this.close(VoiceCloseCodes.tooSlow, "the client is not reading the agent's audio");
      return;
    }
    if (typeof data === 'string') socket.send(data);
    else socket.send(data, { binary: true });
  }

  /** The session's event stream is over: it ended, or its instance is gone. */
  private ended(closing: string | undefined): void {
    if (closing?.includes('SESSION_LOST'))
      this.close(VoiceCloseCodes.lost, 'the instance running the session is gone', false);
    // a moment for the owner's last audio and messages to reach the client
    else setTimeout(() => this.close(VoiceCloseCodes.ended, 'session ended', false), 200).unref();
  }

  private close(code: number, reason: string, endSession = true): void {
    if (this.closed) return;
    void this.finish(endSession, closeSocket(this.deps.socket, code, reason));
  }

  /**
   * The socket is gone: the session ends with it (one client per session). Only a gateway that dies leaves its
   * session waiting for a resume: its owner notices the relay gone (docs/api.md › Resuming a voice socket).
   */
  private async finish(endSession = true, reason?: string): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.ownerCheck);
    this.endReason = reason;
    this.held = undefined;
    await this.release(endSession);
  }

  /** Unsubscribes, stops following, and ends the session if it was attached (again after a late attach). */
  private async release(endSession: boolean): Promise<void> {
    try {
      this.presence?.unsubscribe();
      this.out?.unsubscribe();
      this.stopEvents?.();
    } catch (err) {
      // a connection to the bus that closed meanwhile: nothing is left to unsubscribe from
      this.deps.log.debug({ err: safeError(err) }, 'voice relay released on a closed connection');
    }
    if (!endSession || !this.format) return;
    const { agentId, sessionId, requestId } = this.deps;
    const reason = this.endReason === undefined ? {} : { reason: this.endReason };
    const ending = this.deps.end
      ? this.deps.end(this.endReason, requestId, this.refusal)
      : this.deps.bus.request(
          Subjects.voiceSessionEnd,
          { agentId, sessionId, ...reason },
          { timeoutMs: 10_000, requestId },
        );
    await ending.catch((err: unknown) =>
      this.deps.log.warn(
        { code: 'VOICE_END_FAILED', sessionId, err: safeError(err) },
        'voice session not ended',
      ),
    );
  }
}

/** Whether a control message from the owner is its `ready` (parsed only until it came). */
function isReady(message: string): boolean {
  try {
    return (JSON.parse(message) as { type?: unknown }).type === 'ready';
  } catch {
    return false;
  }
}
