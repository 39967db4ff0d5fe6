import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { answer, BusClient, safeError, type Logger } from '@vab/bus';
import {
  AppError,
  EndAgentSessionBody,
  PLAYGROUND_INSTANCES_SUBJECT,
  roomOwnerSubject,
  Subjects,
  type AgentSessionRequest,
  type LivekitCredentials,
  type Ok,
  type PlaygroundSession,
} from '@vab/contracts';
import { compile } from '@vab/flow';
import { randomUUID } from 'node:crypto';
import type { PlaygroundConfig } from '../config.js';
import { currentKeyEnv } from '../env-keys.js';
import { Recorder } from '../recorder.js';
import { checkTextRuntime, keyResolver } from '../runtime/providers.js';
import { loadTransferTarget } from '../text-sessions.js';
import { MediaServer, ROOM_PREFIX, type RoomMetadata } from './media-server.js';
import { speechProvidersMissing, type AgentRunner, type RunningAgent } from './runner.js';

export type VoiceSessionsConfig = Pick<
  PlaygroundConfig,
  | 'ENV_FILE'
  | 'providerEnv'
  | 'INSTANCE_ID'
  | 'AGENT_JOIN_TIMEOUT_MS'
  | 'MEDIA_SERVER_TIMEOUT_MS'
  | 'USER_TOKEN_TTL_S'
  | 'ROOM_EMPTY_TIMEOUT_S'
  | 'ROOM_DEPARTURE_TIMEOUT_S'
  | 'USER_LEFT_GRACE_MS'
  | 'MAX_SESSION_MS'
  | 'REAPER_MIN_AGE_MS'
  | 'LLM_DECISION_TIMEOUT_MS'
  | 'WEBHOOK_TIMEOUT_MS'
  | 'BUS_TIMEOUT_MS'
>;

interface VoiceSession {
  roomName: string;
  media: MediaServer;
  startedAt: number;
  agent: RunningAgent | undefined;
  recorder: Recorder | undefined;
  sub: Subscription | undefined;
  maxTimer: NodeJS.Timeout | undefined;
  graceTimer: NodeJS.Timeout | undefined;
  stopping: Promise<void> | undefined;
}

/**
 * Voice playground sessions run by this instance: a LiveKit room, the flow's agent in this process, and a
 * voice test session. Every way a session can end goes through the one idempotent `stop`, so no room and
 * no agent outlives it; a periodic reaper deletes rooms whose owning instance is gone.
 */
export class VoiceSessions {
  private readonly sessions = new Map<string, VoiceSession>();
  private readonly bus: BusClient;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    private readonly config: VoiceSessionsConfig,
    private readonly runner: AgentRunner,
    /** Told whenever the number of sessions changes (capacity). */
    private readonly onCountChange: () => void = () => undefined,
  ) {
    this.bus = new BusClient(nc);
  }

  get size(): number {
    return this.sessions.size;
  }

  async create(req: AgentSessionRequest, requestId: string): Promise<PlaygroundSession> {
    const compiled = compile({ nodes: req.nodes, edges: req.edges });
    if (!compiled.ok) throw new AppError('FLOW_INVALID', 'the flow cannot run', { details: compiled.issues });
    const env = await currentKeyEnv(this.config.ENV_FILE, this.config.providerEnv, this.log);
    const creds = req.livekit ?? envCredentials(env);
    if (!creds) {
      const missing = (['LIVEKIT_URL', 'LIVEKIT_API_KEY', 'LIVEKIT_API_SECRET'] as const).filter(
        (n) => !env[n]?.trim(),
      );
      throw new AppError(
        'MISSING_CREDENTIALS',
        `missing media server credentials: ${missing.join(', ')} (send livekit {url, apiKey, apiSecret} or set them on the server)`,
      );
    }
    const keys = keyResolver(req.apiKeys, env);
    checkTextRuntime(compiled.config, keys);
    const speech = speechProvidersMissing(compiled.config, keys);
    if (speech.unsupported.length > 0) {
      throw new AppError(
        'FLOW_INVALID',
        `speech provider not supported by this server: ${speech.unsupported.join(', ')}`,
      );
    }
    if (speech.missingKeys.length > 0) {
      throw new AppError(
        'MISSING_CREDENTIALS',
        `missing API key for: ${speech.missingKeys.join(', ')} (send it in apiKeys or set it on the server)`,
      );
    }

    const roomName = `${ROOM_PREFIX}${randomUUID()}`;
    const log = this.log.child({ roomName, agentId: req.agentId });
    const startedAt = Date.now();
    const media = new MediaServer(creds, this.config.MEDIA_SERVER_TIMEOUT_MS);
    const session: VoiceSession = {
      roomName,
      media,
      startedAt,
      agent: undefined,
      recorder: undefined,
      sub: undefined,
      maxTimer: undefined,
      graceTimer: undefined,
      stopping: undefined,
    };
    this.sessions.set(roomName, session);
    this.onCountChange();
    try {
      let testSessionId: string | undefined;
      if (req.agentId) {
        const ts = await this.bus.request(
          Subjects.testSessionsCreate,
          { agentId: req.agentId, session: { sessionType: 'voice', roomName } },
          { timeoutMs: this.config.BUS_TIMEOUT_MS, requestId },
        );
        testSessionId = ts.id;
        session.recorder = new Recorder(
          this.bus,
          req.agentId,
          ts.id,
          ts.startedAt,
          log,
          this.config.BUS_TIMEOUT_MS,
        );
      }
      const meta: RoomMetadata = {
        owner: this.config.INSTANCE_ID,
        agentId: req.agentId,
        testSessionId,
        startedAt,
      };
      await media.createRoom(roomName, meta, {
        emptyTimeoutS: this.config.ROOM_EMPTY_TIMEOUT_S,
        departureTimeoutS: this.config.ROOM_DEPARTURE_TIMEOUT_S,
      });
      session.sub = this.nc.subscribe(roomOwnerSubject(roomName), {
        callback: (_e, msg) =>
          void answer(this.nc, msg, log, msg.subject, EndAgentSessionBody, async () =>
            this.stop(roomName, 'delete'),
          ),
      });
      session.agent = await this.joinWithin(session, {
        roomName,
        serverUrl: creds.url,
        agentToken: await media.agentToken(roomName, `agent-${randomUUID()}`),
        flow: compiled.config,
        keys,
        record: (m) => session.recorder?.record(m),
        loadTransferTarget: (target) =>
          loadTransferTarget(this.bus, this.config.BUS_TIMEOUT_MS, target, requestId, log),
        onEnded: (reason) => void this.stop(roomName, reason),
        onUserLeft: () => this.userLeft(session),
        log,
        branchTimeoutMs: this.config.LLM_DECISION_TIMEOUT_MS,
        webhookTimeoutMs: this.config.WEBHOOK_TIMEOUT_MS,
      });
      session.maxTimer = setTimeout(
        () => void this.stop(roomName, 'maximum session length'),
        this.config.MAX_SESSION_MS,
      );
      session.maxTimer.unref();
      const token = await media.userToken(roomName, this.config.USER_TOKEN_TTL_S, `user-${randomUUID()}`);
      log.info('voice session started');
      return { token, roomName, serverUrl: creds.url };
    } catch (err) {
      log.warn({ err: safeError(err) }, 'voice session failed to start; cleaning up');
      await this.stop(roomName, 'failed start');
      if (err instanceof AppError) throw err;
      throw new AppError('UPSTREAM_FAILED', 'the agent could not join the room');
    }
  }

  /** The token is handed out only once the agent is in the room; an agent that arrives late is stopped. */
  private async joinWithin(
    session: VoiceSession,
    opts: Parameters<AgentRunner['start']>[0],
  ): Promise<RunningAgent> {
    let timer: NodeJS.Timeout | undefined;
    const started = this.runner.start(opts);
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new AppError('UPSTREAM_FAILED', 'the agent did not join the room in time')),
        this.config.AGENT_JOIN_TIMEOUT_MS,
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

  private userLeft(session: VoiceSession): void {
    clearTimeout(session.graceTimer);
    session.graceTimer = setTimeout(
      () => void this.stop(session.roomName, 'user left'),
      this.config.USER_LEFT_GRACE_MS,
    );
    session.graceTimer.unref();
  }

  /** The one way a session ends. Idempotent: a second call waits for the first. */
  stop(roomName: string, reason: string): Promise<Ok> {
    const session = this.sessions.get(roomName);
    if (!session) return Promise.resolve({ ok: true });
    session.stopping ??= (async () => {
      const log = this.log.child({ roomName });
      clearTimeout(session.maxTimer);
      clearTimeout(session.graceTimer);
      session.sub?.unsubscribe();
      await session.agent
        ?.stop()
        .catch((err: unknown) => log.warn({ err: safeError(err) }, 'agent stop failed'));
      await session.media
        .deleteRoom(roomName)
        .catch((err: unknown) =>
          log.error({ err: safeError(err) }, 'room not deleted; the reaper will retry'),
        );
      await session.recorder?.close();
      this.sessions.delete(roomName);
      this.onCountChange();
      log.info({ reason, durationMs: Date.now() - session.startedAt }, 'voice session stopped');
    })();
    return session.stopping.then(() => ({ ok: true as const }));
  }

  /**
   * DELETE /api/agent-session from any instance: the owner stops its session; when no instance owns the
   * room any more, the room is still deleted on the media server (with the server's credentials).
   */
  async end(roomName: string, requestId: string): Promise<Ok> {
    if (this.sessions.has(roomName)) return this.stop(roomName, 'delete');
    try {
      return await this.bus.requestTo<Ok>(
        roomOwnerSubject(roomName),
        { roomName },
        {
          timeoutMs: this.config.BUS_TIMEOUT_MS + this.config.MEDIA_SERVER_TIMEOUT_MS,
          requestId,
          onNoResponders: new AppError('NOT_FOUND', 'no owner'),
        },
      );
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'NOT_FOUND') throw err;
    }
    const creds = envCredentials(
      await currentKeyEnv(this.config.ENV_FILE, this.config.providerEnv, this.log),
    );
    if (creds && roomName.startsWith(ROOM_PREFIX)) {
      await new MediaServer(creds, this.config.MEDIA_SERVER_TIMEOUT_MS).deleteRoom(roomName);
    }
    return { ok: true };
  }

  async stopAll(reason: string): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((name) => this.stop(name, reason)));
  }

  /**
   * Deletes rooms of ours (by prefix) whose owning instance no longer answers, and closes their test
   * sessions. Runs on every instance; deleting a room twice is harmless.
   */
  async reap(): Promise<{ deleted: string[] }> {
    const creds = envCredentials(
      await currentKeyEnv(this.config.ENV_FILE, this.config.providerEnv, this.log),
    );
    if (!creds) return { deleted: [] };
    const media = new MediaServer(creds, this.config.MEDIA_SERVER_TIMEOUT_MS);
    const rooms = await media.listOurRooms();
    const alive = await this.instancesAlive();
    const deleted: string[] = [];
    for (const { name, meta } of rooms) {
      if (meta && alive.has(meta.owner)) continue;
      if (meta && Date.now() - meta.startedAt < this.config.REAPER_MIN_AGE_MS) continue;
      await media
        .deleteRoom(name)
        .catch((err: unknown) =>
          this.log.warn({ err: safeError(err), roomName: name }, 'reaper could not delete room'),
        );
      deleted.push(name);
      if (meta?.agentId && meta.testSessionId) {
        await new Recorder(
          this.bus,
          meta.agentId,
          meta.testSessionId,
          meta.startedAt,
          this.log,
          this.config.BUS_TIMEOUT_MS,
        ).close();
      }
    }
    if (deleted.length > 0) this.log.warn({ rooms: deleted }, 'reaped rooms of instances that are gone');
    return { deleted };
  }

  private async instancesAlive(): Promise<Set<string>> {
    const alive = new Set<string>([this.config.INSTANCE_ID]);
    try {
      const replies = await this.nc.requestMany(PLAYGROUND_INSTANCES_SUBJECT, '', { maxWait: 500 });
      for await (const m of replies) alive.add(m.string());
    } catch (err) {
      // an empty answer is fine; a failing bus must not make every other instance look dead
      this.log.warn({ err: safeError(err) }, 'could not ask which instances are alive');
      throw new AppError('SERVICE_UNAVAILABLE', 'cannot tell which instances are alive');
    }
    return alive;
  }
}

function envCredentials(env: Record<string, string | undefined>): LivekitCredentials | undefined {
  const url = env.LIVEKIT_URL?.trim();
  const apiKey = env.LIVEKIT_API_KEY?.trim();
  const apiSecret = env.LIVEKIT_API_SECRET?.trim();
  return url && apiKey && apiSecret ? { url, apiKey, apiSecret } : undefined;
}

export { envCredentials };
