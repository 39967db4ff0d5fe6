import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { safeError, type Logger } from '@vab/bus';
import {
  AppError,
  PLAYGROUND_INSTANCES_SUBJECT,
  SUBJECT_TOKEN,
  type AgentSessionRequest,
  type LivekitCredentials,
  type LivekitOverrides,
  type Ok,
  type PlaygroundSession,
} from '@vab/contracts';
import { randomUUID } from 'node:crypto';
import { EgressRefused, type EgressFetch, type HostCheck } from '../../egress/client.js';
import type { EgressPolicy } from '../../egress/policy.js';
import { envLivekit, LIVEKIT_ENV_VARS } from '../../models/env-keys.js';
import { TranscriptWriter } from '../../sessions/transcript-writer.js';
import { sessionRedactor } from '../../sessions/redactor.js';
import type { KeyEnv } from '../../models/provider-keys.js';
import type { TransportDeps } from '../transport-deps.js';
import { httpUrlOf, MediaServer, ROOM_PREFIX, type RoomMetadata } from './media-server.js';
import type { RoomAgent, RoomAgentOptions, RoomAgents } from './room-agents.js';

export interface RoomTransportConfig {
  INSTANCE_ID: string;
  AGENT_JOIN_TIMEOUT_MS: number;
  MEDIA_SERVER_TIMEOUT_MS: number;
  USER_TOKEN_TTL_S: number;
  ROOM_EMPTY_TIMEOUT_S: number;
  ROOM_DEPARTURE_TIMEOUT_S: number;
  USER_LEFT_GRACE_MS: number;
  REAPER_MIN_AGE_MS: number;
  REAPER_INTERVAL_MS: number;
  REAPER_ALIVE_WAIT_MS: number;
  BUS_TIMEOUT_MS: number;
}

/**
 * The voice playground: a LiveKit room, the flow's agent in this process, and the browser's token. The
 * token is handed out only once the agent is in the room. A periodic reaper deletes rooms whose owning
 * instance is gone.
 */
export class RoomTransport {
  private reaper: NodeJS.Timeout | undefined;
  private aliveSub: Subscription | undefined;

  constructor(
    private readonly deps: TransportDeps & {
      nc: NatsConnection;
      agents: RoomAgents;
      /** A media server named in the request is a URL of the caller's too. */
      policy: EgressPolicy;
      /** How a request-named media server is reached: its Twirp calls, and its name checked at start. */
      egressFetch: EgressFetch;
      checkHost: HostCheck;
      log: Logger;
      config: RoomTransportConfig;
    },
  ) {}

  async create(req: AgentSessionRequest, requestId: string): Promise<PlaygroundSession> {
    const { sessions, models, kit, config } = this.deps;
    const env = await this.deps.env();
    const runnable = models.require({ nodes: req.nodes, edges: req.edges }, 'voice', env, req.apiKeys);
    const { serverSide, ...creds } = this.credentials(req.livekit, env);
    // the agent's own connect (rtc-node's FFI) cannot be hooked: the name is resolved and checked now
    if (!serverSide) await this.checkMediaHost(creds.url);
    const roomName = `${ROOM_PREFIX}${randomUUID()}`;
    const media = new MediaServer(
      creds,
      config.MEDIA_SERVER_TIMEOUT_MS,
      serverSide ? globalThis.fetch : this.deps.egressFetch,
    );
    const { result } = await sessions.open(
      {
        sessionType: 'voice',
        sessionId: roomName,
        agentId: req.agentId ?? undefined,
        roomName,
        requestId,
        failure: 'the agent could not join the room',
        redactor: sessionRedactor(env, req.apiKeys, [creds.apiKey, creds.apiSecret]),
        recordAudio: req.record,
      },
      async (ctx) => {
        const meta: RoomMetadata = {
          owner: config.INSTANCE_ID,
          agentId: req.agentId ?? undefined,
          testSessionId: ctx.transcript?.sessionId,
          startedAt: Date.now(),
        };
        await media.createRoom(roomName, meta, {
          emptyTimeoutS: config.ROOM_EMPTY_TIMEOUT_S,
          departureTimeoutS: config.ROOM_DEPARTURE_TIMEOUT_S,
        });
        ctx.onStop(() =>
          media
            .deleteRoom(roomName)
            .catch((err: unknown) =>
              ctx.log.error({ err: safeError(err) }, 'room not deleted; the reaper will retry'),
            ),
        );
        const record = (m: Parameters<RoomAgentOptions['record']>[0]) => ctx.transcript?.write(m);
        const agent = await this.joinWithin({
          roomName,
          serverUrl: creds.url,
          agentToken: await media.agentToken(roomName, `agent-${randomUUID()}`),
          flow: runnable.config,
          converse: async (side) => {
            const conv = await kit.converse({
              ...side,
              flow: runnable,
              apiKeys: req.apiKeys ?? undefined,
              record,
              emit: ctx.emit,
              lastEventId: ctx.lastEventId,
              onEnded: () => ctx.stop('end step'),
              log: ctx.log,
              requestId,
            });
            ctx.usageFrom(() => conv.usage());
            return conv;
          },
          record,
          recordAudio: ctx.recordAudio,
          onEnded: (reason) => ctx.stop(reason),
          onUserLeft: () => ctx.stopAfter(config.USER_LEFT_GRACE_MS, 'user left'),
          log: ctx.log,
        });
        ctx.onStop(() => agent.stop());
        const token = await media.userToken(roomName, config.USER_TOKEN_TTL_S, `user-${randomUUID()}`);
        return { result: { token, roomName, serverUrl: creds.url } };
      },
    );
    return result;
  }

  /**
   * The request's media server credentials, field by field over the server's. The server's key and secret
   * only ever sign for the server's own media server: a request that names another URL brings its own.
   */
  private credentials(sent: LivekitOverrides, env: KeyEnv): LivekitCredentials & { serverSide: boolean } {
    const given = (v: string | null | undefined) => (v?.trim() ? v.trim() : undefined);
    const url = given(sent?.url);
    if (url !== undefined) {
      const verdict = this.deps.policy.checkUrl(httpUrlOf(url));
      if (!verdict.ok) {
        throw new AppError('VALIDATION_FAILED', 'invalid body', {
          issues: [{ path: 'body.livekit.url', message: verdict.reason }],
        });
      }
    }
    const [envUrl, envKey, envSecret] = LIVEKIT_ENV_VARS.map((name) => given(env[name]));
    const serverSide = url === undefined || url === envUrl;
    const fields = {
      url: url ?? envUrl,
      apiKey: given(sent?.apiKey) ?? (serverSide ? envKey : undefined),
      apiSecret: given(sent?.apiSecret) ?? (serverSide ? envSecret : undefined),
    };
    const { url: u, apiKey, apiSecret } = fields;
    if (u && apiKey && apiSecret) return { url: u, apiKey, apiSecret, serverSide };
    const missing = (['url', 'apiKey', 'apiSecret'] as const)
      .map((field, i) => (fields[field] ? undefined : serverSide ? LIVEKIT_ENV_VARS[i] : `livekit.${field}`))
      .filter(Boolean);
    throw new AppError(
      'MISSING_CREDENTIALS',
      `missing media server credentials: ${missing.join(', ')} ` +
        (serverSide
          ? '(send livekit {url, apiKey, apiSecret} or set them on the server)'
          : '(a media server named in the request needs its own key and secret)'),
    );
  }

  private async checkMediaHost(url: string): Promise<void> {
    try {
      await this.deps.checkHost(httpUrlOf(url));
    } catch (err) {
      if (!(err instanceof EgressRefused)) throw err;
      throw new AppError('VALIDATION_FAILED', 'invalid body', {
        issues: [
          {
            path: 'body.livekit.url',
            message: `reaches ${err.host}, a ${err.range} address, which the server's FLOW_EGRESS_ALLOW does not allow`,
          },
        ],
      });
    }
  }

  /** An agent that has not joined in time is stopped, also if it joins later. */
  private async joinWithin(opts: RoomAgentOptions): Promise<RoomAgent> {
    let timer: NodeJS.Timeout | undefined;
    const started = this.deps.agents.start(opts);
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new AppError('UPSTREAM_FAILED', 'the agent did not join the room in time')),
        this.deps.config.AGENT_JOIN_TIMEOUT_MS,
      );
    });
    try {
      return await Promise.race([started, timeout]);
    } catch (err) {
      void started.then(
        (late) => late.stop(),
        () => undefined,
      );
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * DELETE /api/agent-session from any instance: the owner stops its session; when no instance owns the
   * room any more, the room is still deleted on the media server (with the server's credentials).
   */
  async end(roomName: string, requestId: string): Promise<Ok> {
    // a name that cannot be one of our rooms is not looked for (and never becomes part of a subject)
    if (!roomName.startsWith(ROOM_PREFIX) || !SUBJECT_TOKEN.test(roomName)) return { ok: true };
    if (await this.deps.sessions.end(roomName, undefined, requestId)) return { ok: true };
    const creds = envLivekit(await this.deps.env());
    if (creds)
      await new MediaServer(creds, this.deps.config.MEDIA_SERVER_TIMEOUT_MS, globalThis.fetch).deleteRoom(
        roomName,
      );
    return { ok: true };
  }

  /**
   * Answers the other instances' reapers that this one is alive, and reaps every REAPER_INTERVAL_MS. Stop
   * with `stopReaping()`, then `leave()` once this instance's own rooms are gone (the other instances must not
   * see it alive while they go).
   */
  startReaping(): void {
    const { nc, config, log } = this.deps;
    this.aliveSub = nc.subscribe(PLAYGROUND_INSTANCES_SUBJECT, {
      callback: (_e, msg) => void msg.respond(config.INSTANCE_ID),
    });
    this.reaper = setInterval(() => {
      this.reap().catch((err: unknown) =>
        log.warn({ code: 'ROOM_REAPER_FAILED', err: safeError(err) }, 'reaper run failed'),
      );
    }, config.REAPER_INTERVAL_MS);
    this.reaper.unref();
  }

  stopReaping(): void {
    clearInterval(this.reaper);
  }

  leave(): void {
    this.aliveSub?.unsubscribe();
  }

  /**
   * Deletes rooms of ours (by prefix) whose owning instance no longer answers, and closes their test
   * sessions. Runs on every instance; deleting a room twice is harmless.
   */
  async reap(): Promise<{ deleted: string[] }> {
    const { bus, config, log } = this.deps;
    const creds = envLivekit(await this.deps.env());
    if (!creds) return { deleted: [] };
    const media = new MediaServer(creds, config.MEDIA_SERVER_TIMEOUT_MS, globalThis.fetch);
    const rooms = await media.listOurRooms();
    const alive = await this.instancesAlive();
    const deleted: string[] = [];
    for (const { name, meta } of rooms) {
      if (meta && alive.has(meta.owner)) continue;
      if (meta && Date.now() - meta.startedAt < config.REAPER_MIN_AGE_MS) continue;
      await media
        .deleteRoom(name)
        .catch((err: unknown) =>
          log.warn(
            { code: 'ROOM_NOT_DELETED', err: safeError(err), roomName: name },
            'reaper could not delete room',
          ),
        );
      deleted.push(name);
      if (meta?.agentId && meta.testSessionId) {
        await new TranscriptWriter({
          bus,
          agentId: meta.agentId,
          sessionId: meta.testSessionId,
          startedAt: meta.startedAt,
          log,
          timeoutMs: config.BUS_TIMEOUT_MS,
        }).close();
      }
    }
    if (deleted.length > 0)
      log.warn({ code: 'ROOM_REAPED', rooms: deleted }, 'reaped rooms of instances that are gone');
    return { deleted };
  }

  private async instancesAlive(): Promise<Set<string>> {
    const alive = new Set<string>([this.deps.config.INSTANCE_ID]);
    try {
      const replies = await this.deps.nc.requestMany(PLAYGROUND_INSTANCES_SUBJECT, '', {
        maxWait: this.deps.config.REAPER_ALIVE_WAIT_MS,
      });
      for await (const m of replies) alive.add(m.string());
    } catch (err) {
      // an empty answer is fine; a failing bus must not make every other instance look dead
      this.deps.log.warn(
        { code: 'INSTANCES_UNKNOWN', err: safeError(err) },
        'could not ask which instances are alive',
      );
      throw new AppError('SERVICE_UNAVAILABLE', 'cannot tell which instances are alive');
    }
    return alive;
  }
}
