import { headers as natsHeaders, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { type BusClient, type Logger, safeError } from '@vab/bus';
import {
  AppError,
  ownerSubject,
  Subjects,
  VOICE_CONTROL_HEADER,
  VoiceAttached,
  VoiceClientMessage,
  VoiceCloseCodes,
  voiceInSubject,
  voiceOutSubject,
} from '@vab/contracts';
import type { FastifyInstance } from 'fastify';
import { randomUUID } from 'node:crypto';
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { z } from 'zod';
import type { EventStreams } from './events.js';

export interface VoiceSocketSettings {
  /** The agent's audio a client may leave unread before the socket is closed (a client that stopped reading). */
  maxBufferedBytes: number;
  /** How far ahead of real time a client's audio may run (network jitter) before it is refused. */
  burstMs: number;
  /** Bound on attaching to the session's owner. */
  attachTimeoutMs: number;
}

export const DEFAULT_VOICE_SOCKET: VoiceSocketSettings = {
  maxBufferedBytes: 1024 * 1024,
  burstMs: 2000,
  attachTimeoutMs: 5000,
};

const Params = z.object({ id: z.string(), sessionId: z.string() });
const MAX_REASON_BYTES = 120;
/** A close reason fits in a control frame (RFC 6455: 123 bytes). */
const reasonOf = (text: string) => Buffer.from(text).subarray(0, MAX_REASON_BYTES).toString();

/** The bytes that came after an upgrade request's headers (kept by our upgrade listener for `ws`). */
const kHead = Symbol('voice-upgrade-head');
type UpgradeRequest = IncomingMessage & { [kHead]?: Buffer };

/**
 * Upgrades reach the router (and with it the edge's hooks: tokens, tickets, rate limits) as requests. With
 * an upstream the proxy's listener does this for every upgrade; without one, this listener does, as the
 * proxy and @fastify/websocket do: both cannot listen, each would answer every upgrade. An upgrade refused
 * with an HTTP answer (401, 404, 429) is then ended with it, not left half-open to hold the server's close.
 */
function routeUpgrades(app: FastifyInstance): void {
  app.server.on('upgrade', (rawRequest: UpgradeRequest, socket: Duplex, head: Buffer) => {
    rawRequest[kHead] = head;
    const response = new ServerResponse(rawRequest);
    response.assignSocket(socket as Socket);
    response.on('finish', () => socket.destroy());
    socket.once('end', () => socket.destroy());
    app.routing(rawRequest, response);
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
): void {
  if (!deps.upstream) routeUpgrades(app);
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  app.get(
    '/api/agents/:id/voice-sessions/:sessionId/audio',
    { schema: { hide: true, params: Params } },
    (req, reply) => {
      if (req.headers.upgrade?.toLowerCase() !== 'websocket') {
        throw new AppError('VALIDATION_FAILED', 'this path is a WebSocket: open it with an upgrade');
      }
      const { id: agentId, sessionId } = req.params as z.infer<typeof Params>;
      const { nc, bus } = deps;
      reply.hijack();
      const raw = req.raw as UpgradeRequest;
      wss.handleUpgrade(raw, raw.socket, raw[kHead] ?? Buffer.alloc(0), (socket) => {
        if (!nc || !bus) {
          socket.close(VoiceCloseCodes.lost, 'this gateway has no bus');
          return;
        }
        const relay = new VoiceRelay({
          ...deps,
          nc,
          bus,
          socket,
          agentId,
          sessionId,
          requestId: String(req.id),
        });
        void relay.open();
      });
    },
  );
}

/** One client's socket, relayed to and from its session's owner. */
class VoiceRelay {
  private readonly connectionId = randomUUID().replaceAll('-', '');
  private out: Subscription | undefined;
  private stopEvents: (() => void) | undefined;
  private format: VoiceAttached | undefined;
  private frameMs = 0;
  private firstFrameAt = 0;
  private sentMs = 0;
  private closed = false;
  /** Why the gateway closed the socket, when it did: the session ends with it as `session_ended`'s reason. */
  private endReason: string | undefined;
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
    },
  ) {
    this.control.set(VOICE_CONTROL_HEADER, '1');
  }

  async open(): Promise<void> {
    const { socket, nc, sessionId, agentId } = this.deps;
    socket.on('message', (data: Buffer, isBinary: boolean) => this.fromClient(data, isBinary));
    socket.on('close', () => void this.finish());
    socket.on('error', () => void this.finish());
    // before attaching: the owner's first messages (ready, the greeting's audio) must not be missed
    this.out = nc.subscribe(voiceOutSubject(sessionId), {
      callback: (_e, msg) => this.toClient(msg.data, msg.headers?.has(VOICE_CONTROL_HEADER) ?? false),
    });
    try {
      this.stopEvents = await this.deps.streams?.follow(
        { agentId, sessionId },
        { push: (_id, _frame, json) => this.event(json), finish: (closing) => this.ended(closing) },
        this.deps.requestId,
      );
      this.format = VoiceAttached.parse(
        await this.deps.bus.requestTo(
          ownerSubject(sessionId, 'attach'),
          { agentId, sessionId, connectionId: this.connectionId },
          {
            timeoutMs: this.deps.settings.attachTimeoutMs,
            requestId: this.deps.requestId,
            onNoResponders: new AppError('NOT_FOUND', 'no voice session with this id is running'),
          },
        ),
      );
      this.frameMs = (this.format.frameBytes / 2 / this.format.sampleRate) * 1000;
    } catch (err) {
      const e = err instanceof AppError ? err : undefined;
      const code =
        e?.code === 'NOT_FOUND'
          ? VoiceCloseCodes.notFound
          : e?.code === 'CONFLICT'
            ? VoiceCloseCodes.taken
            : VoiceCloseCodes.lost;
      this.close(code, e?.message ?? 'the voice session could not be reached', false);
    } finally {
      // the client left while this socket was being attached: nothing of it may stay behind (and a session
      // attached meanwhile ends, as it would have on the close); a second release only unsubscribes again
      if (this.closed) void this.release(true);
    }
  }

  private fromClient(data: Buffer, isBinary: boolean): void {
    const format = this.format;
    if (!format || this.closed) return;
    const { nc, sessionId } = this.deps;
    if (isBinary) {
      if (data.byteLength !== format.frameBytes) {
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
        this.close(VoiceCloseCodes.tooFast, 'audio faster than real time: send it as it is recorded');
        return;
      }
      nc.publish(voiceInSubject(sessionId), data);
      return;
    }
    let parsed: ReturnType<typeof VoiceClientMessage.safeParse> | undefined;
    try {
      parsed = VoiceClientMessage.safeParse(JSON.parse(data.toString('utf8')));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      this.close(
        VoiceCloseCodes.badInput,
        'not a message of the voice protocol (docs/api.md › Voice sessions)',
      );
      return;
    }
    nc.publish(voiceInSubject(sessionId), JSON.stringify(parsed.data), { headers: this.control });
  }

  private toClient(data: Uint8Array, control: boolean): void {
    const { socket, settings } = this.deps;
    if (this.closed || socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount > settings.maxBufferedBytes) {
      this.close(VoiceCloseCodes.tooSlow, "the client is not reading the agent's audio");
      return;
    }
    if (control) socket.send(Buffer.from(data).toString('utf8'));
    else socket.send(data, { binary: true });
  }

  /** One of the session's events, its JSON as stored. */
  private event(json: string): void {
    if (this.closed) return;
    this.deps.socket.send(`{"type":"event","event":${json}}`);
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
    const { socket } = this.deps;
    const told = reasonOf(reason);
    if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING)
      socket.close(code, told);
    void this.finish(endSession, told);
  }

  /** The socket is gone: the session ends with it (one client per session, no resuming). */
  private async finish(endSession = true, reason?: string): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.endReason = reason;
    await this.release(endSession);
  }

  /** Unsubscribes, stops following, and ends the session if it was attached (again after a late attach). */
  private async release(endSession: boolean): Promise<void> {
    this.out?.unsubscribe();
    this.stopEvents?.();
    if (!endSession || !this.format) return;
    const { agentId, sessionId, requestId } = this.deps;
    const reason = this.endReason === undefined ? {} : { reason: this.endReason };
    await this.deps.bus
      .request(Subjects.voiceSessionEnd, { agentId, sessionId, ...reason }, { timeoutMs: 10_000, requestId })
      .catch((err: unknown) =>
        this.deps.log.warn(
          { code: 'VOICE_END_FAILED', sessionId, err: safeError(err) },
          'voice session not ended',
        ),
      );
  }
}
