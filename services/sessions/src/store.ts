import { RawJson } from '@vab/bus';
import {
  AppError,
  type ConversationEntry,
  type CreateConversationEntryBody,
  type CanaryRollback,
  type DeployRecord,
  type DeployFailure,
  type DeploySettings,
  DEFAULT_DEPLOY_SETTINGS,
  type CloseReport,
  type SessionMessage,
  type SessionType,
  type Recording,
  type TestSession,
} from '@vab/contracts';
import { closeDelta, mergeInto, turnDelta } from './stats/histogram.js';
import { scanKeys, scriptError, storage, WriteConcern, type RedisClient } from '@vab/storage';
import { randomUUID } from 'node:crypto';
import type { SessionsLimits } from './config.js';
import { keys, SEQ_WIDTH, SESSIONS_KEY } from './redis-keys.js';
import {
  APPEND_ENTRY,
  APPEND_MESSAGE,
  CLOSE_SESSION,
  CREATE_DEPLOY,
  FORGET_INDEXED,
  INDEX_ANEW,
  SET_RECORDING,
  STOP_DEPLOY,
  SET_DEPLOY_SETTINGS,
  UPDATE_DEPLOY,
} from './scripts.js';

interface Scripts {
  ssAppendEntry(k1: string, ...argv: string[]): Promise<number>;
  ssAppendMessage(numKeys: number, ...keysThenArgv: string[]): Promise<number>;
  ssCloseSession(numKeys: number, ...keysThenArgv: string[]): Promise<string[]>;
  ssSetRecording(testSessionRedisKey: string, recordingJson: string): Promise<string[]>;
  ssCreateDeploy(k1: string, k2: string, k3: string, k4: string, ...argv: string[]): Promise<string[]>;
  ssUpdateDeploy(...keysThenArgv: string[]): Promise<string[]>;
  ssStopDeploy(...keysThenArgv: string[]): Promise<string[]>;
  ssSetDeploySettings(k1: string, ...argv: string[]): Promise<string[]>;
  ssForgetIndexed(index: string, member: string, score: string): Promise<number>;
  ssIndexAnew(index: string, member: string, score: string): Promise<[number, string]>;
}

function pairs(flat: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!;
  return out;
}

/** The UTC day (yyyymmdd) of an instant: the day stats hash it counts in. */
export const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');

function toSession(h: Record<string, string>): TestSession {
  return {
    id: h.id ?? '',
    agentId: h.agentId ?? '',
    startedAt: Number(h.startedAt),
    endedAt: h.endedAt ? Number(h.endedAt) : null,
    durationMs: h.durationMs ? Number(h.durationMs) : null,
    roomName: h.roomName ? h.roomName : null,
    sessionType: h.sessionType as SessionType,
    status: h.status === 'closed' ? 'closed' : 'open',
    version: h.version ? Number(h.version) : null,
    usage: h.usage ? (JSON.parse(h.usage) as TestSession['usage']) : [],
    recording: h.recording ? (JSON.parse(h.recording) as Recording) : null,
    endedReason: h.endedReason === 'instance_lost' ? 'instance_lost' : null,
  };
}

function toDeploy(h: Record<string, string>): DeployRecord {
  return {
    id: h.id ?? '',
    agentId: h.agentId ?? '',
    deployNumber: Number(h.deployNumber),
    version: Number(h.version),
    status: h.status as DeployRecord['status'],
    subdomain: h.subdomain ?? '',
    createdAt: Number(h.createdAt),
    updatedAt: Number(h.updatedAt),
    ...(h.gateOverride ? { gateOverride: JSON.parse(h.gateOverride) as DeployRecord['gateOverride'] } : {}),
    ...(h.stopped ? { stopped: JSON.parse(h.stopped) as DeployRecord['stopped'] } : {}),
    // a record written before deploys had call settings has the defaults
    ...DEFAULT_DEPLOY_SETTINGS,
    ...(h.settings ? (JSON.parse(h.settings) as Partial<DeploySettings>) : {}),
    ...(h.external ? { external: true } : {}),
    ...(h.liveAt ? { liveAt: Number(h.liveAt) } : {}),
    ...(h.failure ? { failure: JSON.parse(h.failure) as DeployFailure } : {}),
    ...(h.trafficPercent ? { trafficPercent: Number(h.trafficPercent) } : {}),
    ...(h.canaryWindowMs ? { canaryWindowMs: Number(h.canaryWindowMs) } : {}),
    ...(h.rollback ? { rollback: JSON.parse(h.rollback) as CanaryRollback } : {}),
    ...(h.promoted ? { promoted: JSON.parse(h.promoted) as DeployRecord['promoted'] } : {}),
  };
}

const sessionNotFound = (sessionId: string) =>
  new AppError('NOT_FOUND', `test session ${sessionId} not found`);
const tooLarge = (what: string, limit: number) =>
  new AppError('LIMIT_EXCEEDED', `${what} exceeds the limit of ${limit}`);

/** Sessions whose stats keys are remembered (about 200 bytes each). */
const STATS_KEYS_CACHED = 10_000;

export class SessionsStore {
  private readonly statsKeysCache = new Map<string, string[]>();
  private readonly redis: RedisClient & Scripts;

  private readonly writes: WriteConcern;
  private readonly limits: SessionsLimits;
  private readonly now: () => number;
  private readonly statsTtlSeconds: number;

  constructor(
    redis: RedisClient,
    opts: {
      limits: SessionsLimits;
      writes?: WriteConcern | undefined;
      /** The clock (tests set it). */
      now?: () => number;
      /** How long stats hashes live after their last write (s); 0 = forever. */
      statsTtlSeconds?: number;
    },
  ) {
    this.limits = opts.limits;
    this.now = opts.now ?? Date.now;
    this.statsTtlSeconds = opts.statsTtlSeconds ?? 0;
    this.writes = opts.writes ?? new WriteConcern(redis, 0, 0);
    redis.defineCommand('ssAppendEntry', { numberOfKeys: 1, lua: APPEND_ENTRY });
    // the number of keys varies (the stats hashes a message or close counts in): passed first
    redis.defineCommand('ssAppendMessage', { lua: APPEND_MESSAGE });
    redis.defineCommand('ssCloseSession', { lua: CLOSE_SESSION });
    redis.defineCommand('ssSetRecording', { numberOfKeys: 1, lua: SET_RECORDING });
    redis.defineCommand('ssCreateDeploy', { numberOfKeys: 3, lua: CREATE_DEPLOY });
    redis.defineCommand('ssUpdateDeploy', { numberOfKeys: 9, lua: UPDATE_DEPLOY });
    redis.defineCommand('ssStopDeploy', { numberOfKeys: 8, lua: STOP_DEPLOY });
    redis.defineCommand('ssSetDeploySettings', { numberOfKeys: 1, lua: SET_DEPLOY_SETTINGS });
    redis.defineCommand('ssForgetIndexed', { numberOfKeys: 1, lua: FORGET_INDEXED });
    redis.defineCommand('ssIndexAnew', { numberOfKeys: 1, lua: INDEX_ANEW });
    this.redis = redis as RedisClient & Scripts;
  }

  // ---- builder conversation ----

  async appendEntry(agentId: string, body: CreateConversationEntryBody): Promise<ConversationEntry> {
    if (body.content.length > this.limits.maxConversationContentChars) {
      throw tooLarge('content length', this.limits.maxConversationContentChars);
    }
    if (body.operations.length > this.limits.maxOperationsPerEntry) {
      throw tooLarge('number of operations', this.limits.maxOperationsPerEntry);
    }
    if (body.nodeAttachments.length > this.limits.maxAttachmentsPerEntry) {
      throw tooLarge('number of node attachments', this.limits.maxAttachmentsPerEntry);
    }
    const entry: ConversationEntry = { id: randomUUID(), timestamp: this.now(), ...body };
    const json = JSON.stringify(entry);
    if (Buffer.byteLength(json) > this.limits.maxConversationEntryBytes) {
      throw tooLarge('size of the entry in bytes', this.limits.maxConversationEntryBytes);
    }
    try {
      await this.redis.ssAppendEntry(
        keys.conversation(agentId),
        json,
        String(this.limits.maxConversationEntries),
      );
    } catch (err) {
      throw scriptError(err, {});
    }
    await this.writes.confirm(keys.conversation(agentId));
    return entry;
  }

  /** Stored entries are already contract JSON: joined, not parsed. `undefined` when there are none. */
  async listEntries(agentId: string): Promise<RawJson<ConversationEntry[]> | undefined> {
    const items = await storage(() => this.redis.lrange(keys.conversation(agentId), 0, -1));
    return items.length === 0 ? undefined : new RawJson(`[${items.join(',')}]`);
  }

  // ---- test sessions ----

  /** The stats hashes a session counts in: its start day's, and its version's when it runs a stored one. */
  private statsKeys(agentId: string, startedAt: number, version: number | null): string[] {
    const day = keys.dayStats(agentId, dayOf(startedAt));
    return version === null ? [day] : [day, keys.versionStats(agentId, version)];
  }

  async createSession(
    agentId: string,
    sessionType: SessionType,
    roomName: string | undefined,
    version: number | null = null,
  ): Promise<TestSession> {
    const session: TestSession = {
      id: randomUUID(),
      agentId,
      startedAt: this.now(),
      endedAt: null,
      durationMs: null,
      roomName: roomName ?? null,
      sessionType,
      status: 'open',
      version,
      usage: [],
      recording: null,
      endedReason: null,
    };
    const tx = this.redis
      .multi()
      .hset(keys.session(agentId, session.id), {
        id: session.id,
        agentId,
        startedAt: session.startedAt,
        roomName: roomName ?? '',
        sessionType,
        status: 'open',
        msgSeq: 0,
        ...(version === null ? {} : { version }),
      })
      .zadd(keys.sessions(agentId), session.startedAt, session.id);
    for (const k of this.statsKeys(agentId, session.startedAt, version)) {
      tx.hincrby(k, 'sessions', 1);
      if (this.statsTtlSeconds > 0) tx.expire(k, this.statsTtlSeconds);
    }
    await storage(() => tx.exec());
    // another slot on a cluster: its own command (a crash between the two leaves a session unswept, never a
    // swept session that is alive)
    await storage(() => this.redis.zadd(keys.openSessions, session.startedAt, `${agentId}/${session.id}`));
    this.statsKeysCache.set(session.id, this.statsKeys(agentId, session.startedAt, version));
    await this.writes.confirm(keys.sessions(agentId));
    return session;
  }

  /** `undefined` when the agent has no sessions at all (the caller then checks the agent exists). */
  async listSessions(agentId: string): Promise<TestSession[] | undefined> {
    return this.newestFirst(keys.sessions(agentId), (id) => keys.session(agentId, id), toSession);
  }

  async getSession(agentId: string, sessionId: string): Promise<TestSession> {
    const h = await storage(() => this.redis.hgetall(keys.session(agentId, sessionId)));
    if (!h.id) throw sessionNotFound(sessionId);
    return toSession(h);
  }

  /**
   * The stats keys of a session (its start day's and its version's), or NOT_FOUND. Both never change, so
   * they are remembered: a turn's figures cost no extra round trip once its session is known here.
   */
  private async statsKeysOf(agentId: string, sessionId: string): Promise<string[]> {
    const known = this.statsKeysCache.get(sessionId);
    if (known) return known;
    const [startedAt, version] = await storage(() =>
      this.redis.hmget(keys.session(agentId, sessionId), 'startedAt', 'version'),
    );
    if (!startedAt) throw sessionNotFound(sessionId);
    const found = this.statsKeys(agentId, Number(startedAt), version ? Number(version) : null);
    if (this.statsKeysCache.size >= STATS_KEYS_CACHED) this.statsKeysCache.clear();
    this.statsKeysCache.set(sessionId, found);
    return found;
  }

  async closeSession(
    agentId: string,
    sessionId: string,
    endedAt: number,
    durationMs: number,
    report?: CloseReport,
  ): Promise<TestSession> {
    try {
      const statsKeys = report ? await this.statsKeysOf(agentId, sessionId) : [];
      const flat = await this.redis.ssCloseSession(
        1 + statsKeys.length,
        keys.session(agentId, sessionId),
        ...statsKeys,
        String(endedAt),
        String(durationMs),
        ...(report
          ? [
              JSON.stringify(report.usage),
              JSON.stringify(closeDelta(report.usage, report.errors, report.failedTurns)),
              String(this.statsTtlSeconds),
            ]
          : []),
      );
      await this.writes.confirm(keys.session(agentId, sessionId));
      await storage(() => this.redis.zrem(keys.openSessions, `${agentId}/${sessionId}`));
      return toSession(pairs(flat));
    } catch (err) {
      throw scriptError(err, {
        NOT_FOUND: () => sessionNotFound(sessionId),
        ENDED_BEFORE_START: (startedAt) =>
          new AppError('VALIDATION_FAILED', `endedAt is before the session started (${startedAt})`, {
            issues: [{ path: 'body.endedAt', message: `must be at or after startedAt ${startedAt}` }],
          }),
        CONFLICT: () =>
          new AppError('CONFLICT', 'the session is already closed with a different endedAt/durationMs'),
      });
    }
  }

  /** The session's recording is stored: its record says so. A session that is gone stays gone. */
  async setRecording(agentId: string, sessionId: string, recording: Recording): Promise<TestSession> {
    const key = keys.session(agentId, sessionId);
    const flat = await storage(() => this.redis.ssSetRecording(key, JSON.stringify(recording)));
    if (flat.length === 0) throw sessionNotFound(sessionId);
    await this.writes.confirm(key);
    return toSession(pairs(flat));
  }

  async appendMessage(agentId: string, sessionId: string, message: SessionMessage): Promise<number> {
    if (message.content.length > this.limits.maxMessageChars) {
      throw tooLarge('content length', this.limits.maxMessageChars);
    }
    const json = JSON.stringify({
      role: message.role,
      content: message.content,
      stepId: message.stepId,
      timestamp: message.timestamp,
      ...(message.metrics ? { metrics: message.metrics } : {}),
    });
    try {
      const statsKeys = message.metrics ? await this.statsKeysOf(agentId, sessionId) : [];
      const seq = await this.redis.ssAppendMessage(
        2 + statsKeys.length,
        keys.session(agentId, sessionId),
        keys.messages(agentId, sessionId),
        ...statsKeys,
        String(message.timestamp),
        json,
        String(this.limits.maxMessagesPerSession),
        ...(message.metrics
          ? [JSON.stringify(turnDelta(message.metrics)), String(this.statsTtlSeconds)]
          : []),
      );
      await this.writes.confirm(keys.session(agentId, sessionId));
      return seq;
    } catch (err) {
      throw scriptError(err, {
        NOT_FOUND: () => sessionNotFound(sessionId),
        LIMIT_EXCEEDED: () =>
          tooLarge('number of messages in the session', this.limits.maxMessagesPerSession),
      });
    }
  }

  /** The transcript, parsed (a replay reads its turns and steps). */
  async messagesOf(agentId: string, sessionId: string): Promise<SessionMessage[]> {
    return JSON.parse((await this.listMessages(agentId, sessionId)).json) as SessionMessage[];
  }

  /** Timestamp order, ties in arrival order; one round trip, the stored JSON joined without parsing. */
  async listMessages(agentId: string, sessionId: string): Promise<RawJson<SessionMessage[]>> {
    const res = await storage(() =>
      this.redis
        .multi()
        .exists(keys.session(agentId, sessionId))
        .zrange(keys.messages(agentId, sessionId), 0, -1)
        .exec(),
    );
    if (res?.[0]?.[1] !== 1) throw sessionNotFound(sessionId);
    const members = (res[1]?.[1] as string[] | undefined) ?? [];
    return new RawJson(`[${members.map((m) => m.slice(SEQ_WIDTH + 1)).join(',')}]`);
  }

  // ---- deploys ----

  // ---- stats ----

  /** The merged stats hashes of one version (one hash) or of days (one per day, one round trip). */
  async statsFields(
    agentId: string,
    source: { version: number } | { days: string[] },
  ): Promise<Map<string, number>> {
    const statsKeys =
      'version' in source
        ? [keys.versionStats(agentId, source.version)]
        : source.days.map((d) => keys.dayStats(agentId, d));
    const pipe = this.redis.pipeline();
    for (const k of statsKeys) pipe.hgetall(k);
    const replies = await storage(() => pipe.exec());
    const merged = new Map<string, number>();
    for (const [err, hash] of replies ?? []) {
      if (err) throw err;
      mergeInto(merged, hash as Record<string, string>);
    }
    return merged;
  }

  async createDeploy(
    agentId: string,
    version: number,
    subdomainBase: string,
    settings: DeploySettings = DEFAULT_DEPLOY_SETTINGS,
    external = false,
    canary: { trafficPercent?: number | undefined; canaryWindowMs?: number | undefined } = {},
  ): Promise<DeployRecord> {
    const deployId = randomUUID();
    const subdomain = await this.claimSubdomain(agentId, subdomainBase);
    // indexed before it exists, so no crash leaves a deploy the sweep cannot find (an entry whose record was
    // never written is dropped by the sweep); an external deployer moves its own, however long it takes
    if (!external) {
      await storage(() => this.redis.zadd(keys.pipelineDeploys, this.now(), `${agentId}/${deployId}`));
    }
    try {
      const flat = await this.redis.ssCreateDeploy(
        keys.deployMeta(agentId),
        keys.deploys(agentId),
        keys.deploy(agentId, deployId),
        agentId,
        deployId,
        String(this.now()),
        String(version),
        subdomain,
        JSON.stringify(settings),
        external ? '1' : '',
        canary.trafficPercent !== undefined ? String(canary.trafficPercent) : '',
        canary.canaryWindowMs !== undefined ? String(canary.canaryWindowMs) : '',
      );
      await this.writes.confirm(keys.deployMeta(agentId));
      return toDeploy(pairs(flat));
    } catch (err) {
      throw scriptError(err, {});
    }
  }

  /**
   * The agent's subdomain: the one it has, else the first of `base`, `base-2`, `base-3`… free in the global
   * hash (HSETNX: two agents never hold one). Claimed before the deploy script records it, because the
   * global hash lives in a slot of its own on a cluster: a request interrupted in between leaves a claim
   * its agent has not recorded yet, which the agent's next deploy finds (the claim names it) and uses.
   */
  private async claimSubdomain(agentId: string, base: string): Promise<string> {
    return storage(async () => {
      const current = await this.redis.hget(keys.deployMeta(agentId), 'subdomain');
      if (current) return current;
      for (let n = 1; ; n++) {
        const candidate = n === 1 ? base : `${base}-${n}`;
        if ((await this.redis.hsetnx(keys.subdomains, candidate, agentId)) === 1) return candidate;
        if ((await this.redis.hget(keys.subdomains, candidate)) === agentId) return candidate;
      }
    });
  }

  /** Open sessions that started before `cutoff`, as `{ agentId, sessionId, startedAt }`, oldest first. */
  async openSessionsBefore(
    cutoff: number,
    batch: number,
  ): Promise<{ agentId: string; sessionId: string; startedAt: number }[]> {
    const flat = await storage(() =>
      this.redis.zrangebyscore(keys.openSessions, '-inf', `(${cutoff}`, 'WITHSCORES', 'LIMIT', 0, batch),
    );
    const out: { agentId: string; sessionId: string; startedAt: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const [agentId, sessionId] = flat[i]!.split('/');
      if (agentId && sessionId) out.push({ agentId, sessionId, startedAt: Number(flat[i + 1]) });
    }
    return out;
  }

  /** Drops a session from the open index (closed, or gone with retention). */
  async forgetOpen(agentId: string, sessionId: string): Promise<void> {
    await storage(() => this.redis.zrem(keys.openSessions, `${agentId}/${sessionId}`));
  }

  /**
   * The owner sweep's close: the session closed at `endedAt`, its reason `instance_lost` set first (a sweep
   * that fails between the two closes it again next pass, and the reason is already there).
   */
  async closeLost(
    agentId: string,
    sessionId: string,
    endedAt: number,
    durationMs: number,
  ): Promise<TestSession> {
    await storage(() => this.redis.hset(keys.session(agentId, sessionId), 'endedReason', 'instance_lost'));
    return this.closeSession(agentId, sessionId, endedAt, durationMs);
  }

  /**
   * The owner sweep found no owner: remembers since when (the first time) and answers it. An owner seen
   * again clears it (`lostAt` undefined).
   */
  async lostSince(agentId: string, sessionId: string, now: number | undefined): Promise<number | undefined> {
    const key = keys.session(agentId, sessionId);
    if (now === undefined) {
      await storage(() => this.redis.hdel(key, 'lostAt'));
      return undefined;
    }
    const [, since] = await storage(() =>
      this.redis.multi().hsetnx(key, 'lostAt', now).hget(key, 'lostAt').exec(),
    ).then((r) => (r ?? []).map(([, v]) => v));
    return since === null || since === undefined ? now : Number(since);
  }

  /**
   * Retention: deletes the test sessions that started before `cutoff` (epoch ms), with their messages, in
   * batches of `batch` sessions (one MULTI each, UNLINK so Redis frees big transcripts in the background),
   * over every agent (SCAN of every master). Returns how many went.
   */
  async sweepSessions(
    cutoff: number,
    batch = 100,
    /** Told which of the removed sessions had a recording, after they are gone. */
    recorded: (agentId: string, sessionIds: string[]) => Promise<unknown> = async () => undefined,
  ): Promise<number> {
    let removed = 0;
    for await (const found of scanKeys(this.redis, 'ss:{*}:ts')) {
      for (const key of found) {
        const agentId = SESSIONS_KEY.exec(key)?.[1];
        if (!agentId) continue;
        for (;;) {
          const ids = await storage(() =>
            this.redis.zrangebyscore(key, '-inf', `(${cutoff}`, 'LIMIT', 0, batch),
          );
          if (ids.length === 0) break;
          const doomed = ids.flatMap((id) => [keys.session(agentId, id), keys.messages(agentId, id)]);
          const hasRecording = await storage(() =>
            Promise.all(ids.map((id) => this.redis.hexists(keys.session(agentId, id), 'recording'))),
          );
          await storage(() =>
            this.redis
              .multi()
              .unlink(...doomed)
              .zrem(key, ...ids)
              .exec(),
          );
          removed += ids.length;
          await recorded(
            agentId,
            ids.filter((_, i) => hasRecording[i] === 1),
          );
          if (ids.length < batch) break;
        }
      }
    }
    return removed;
  }

  async getDeploy(agentId: string, deployId: string): Promise<DeployRecord> {
    const h = await storage(() => this.redis.hgetall(keys.deploy(agentId, deployId)));
    if (!h.id) throw new AppError('NOT_FOUND', `deploy ${deployId} not found`);
    return toDeploy(h);
  }

  /** Every version a deploy record of the agent names, whatever its status. */
  async pinnedVersions(agentId: string): Promise<number[]> {
    const deploys = (await this.listDeploys(agentId)) ?? [];
    return [...new Set(deploys.map((d) => d.version))].sort((a, b) => a - b);
  }

  async listDeploys(agentId: string): Promise<DeployRecord[] | undefined> {
    return this.newestFirst(keys.deploys(agentId), (id) => keys.deploy(agentId, id), toDeploy);
  }

  /**
   * The hashes a sorted-set index names, highest score first: one ZREVRANGE plus one pipeline, whatever the
   * count. `undefined` when the index is empty.
   */
  private async newestFirst<T>(
    index: string,
    keyOf: (id: string) => string,
    map: (h: Record<string, string>) => T,
  ): Promise<T[] | undefined> {
    return storage(async () => {
      const ids = await this.redis.zrevrange(index, 0, -1);
      if (ids.length === 0) return undefined;
      const pipe = this.redis.pipeline();
      for (const id of ids) pipe.hgetall(keyOf(id));
      const rows = (await pipe.exec()) ?? [];
      return rows.map(([err, h]) => {
        if (err) throw err;
        return map(h as Record<string, string>);
      });
    });
  }

  /** Takes the agent's live deploy offline (`stopped`, with `reason`); null when none was live. */
  async stopLiveDeploy(agentId: string, reason: string): Promise<DeployRecord | null> {
    const now = this.now();
    const flat = await storage(() =>
      this.redis.ssStopDeploy(
        keys.deployMeta(agentId),
        ...keys.canaryCountKeys(agentId),
        String(now),
        keys.deployPrefix(agentId),
        JSON.stringify({ reason, at: now }),
      ),
    );
    await this.writes.confirm(keys.deployMeta(agentId));
    return flat.length > 0 ? toDeploy(pairs(flat)) : null;
  }

  async updateDeploy(
    agentId: string,
    deployId: string,
    status: 'building' | 'live' | 'failed' | 'canary' | 'rolled_back',
    gateOverride?: { reason: string; at: number },
    failure?: DeployFailure,
    /** A rolled-back canary's `rollback`, a promoted one's `promoted`. */
    outcome?: CanaryRollback | NonNullable<DeployRecord['promoted']>,
  ): Promise<DeployRecord> {
    const member = `${agentId}/${deployId}`;
    /** The score this call indexed the deploy at, when it added the entry (not there before). */
    let indexedAt: number | undefined;
    if (status === 'canary') {
      // indexed before the move (due at once, or when the sweep last put it off: the sweep leaves one still
      // building for its next pass), so no crash leaves a canary the sweep cannot find, with a window or not.
      // A score of its own (INDEX_ANEW): a refused move forgets only what it wrote, never another move's entry
      // of the same millisecond
      const [added, at] = await storage(() =>
        this.redis.ssIndexAnew(keys.canaries, member, String(this.now())),
      );
      if (added === 1) indexedAt = Number(at);
    }
    let refused = false;
    const refusal = (e: AppError) => ((refused = true), e);
    let moved: DeployRecord;
    try {
      const flat = await this.redis.ssUpdateDeploy(
        keys.deployMeta(agentId),
        keys.deploy(agentId, deployId),
        ...keys.canaryCountKeys(agentId),
        status,
        String(this.now()),
        deployId,
        keys.deployPrefix(agentId),
        gateOverride ? JSON.stringify(gateOverride) : '',
        failure ? JSON.stringify(failure) : '',
        outcome ? JSON.stringify(outcome) : '',
      );
      await this.writes.confirm(keys.deployMeta(agentId));
      moved = toDeploy(pairs(flat));
    } catch (err) {
      const mapped = scriptError(err, {
        NOT_FOUND: () => refusal(new AppError('NOT_FOUND', `deploy ${deployId} not found`)),
        NO_LIVE: () =>
          refusal(
            new AppError('CONFLICT', 'nothing is live: a canary runs beside a live deploy, deploy one first'),
          ),
        SETTLED: (to) =>
          refusal(
            new AppError('ILLEGAL_TRANSITION', `the deploy is ${to} already: another move settled it first`),
          ),
        ILLEGAL_TRANSITION: (detail) => {
          const [from, to] = detail.split(' ');
          return refusal(new AppError('ILLEGAL_TRANSITION', `a ${from} deploy cannot move to ${to}`));
        },
      });
      // refused, it is no canary: the entry it added goes (a live or failed deploy left there would be
      // announced again by the sweep), unless written again since (another move to canary, which may stand)
      if (refused && indexedAt !== undefined) await this.forgetCanary(member, indexedAt);
      throw mapped;
    }
    // the pipeline's index keeps it until its move is announced (DeployPipeline.announce): the sweep
    // publishes again what a crash left unannounced
    return moved;
  }

  /**
   * Deploys the pipeline was moving, made before `cutoff`, whose move out of pending/building was not
   * announced yet, as `<agentId>/<deployId>`, oldest first (the deploy sweep fails those whose pipeline was
   * interrupted, and announces the others' moves).
   */
  async pipelineDeploysBefore(cutoff: number, batch: number): Promise<string[]> {
    return storage(() =>
      this.redis.zrangebyscore(keys.pipelineDeploys, '-inf', `(${cutoff}`, 'LIMIT', 0, batch),
    );
  }

  /**
   * A deploy's move to `status` was announced (its event stored): it leaves the pipeline's index, and the
   * canaries' unless it is a canary still (it is yet to be judged). One round trip (one slot).
   */
  async announced(agentId: string, deployId: string, status: DeployRecord['status']): Promise<void> {
    const member = `${agentId}/${deployId}`;
    const tx = this.redis.multi().zrem(keys.pipelineDeploys, member);
    if (status !== 'canary') tx.zrem(keys.canaries, member).zrem(keys.legacyCanaryWindows, member);
    await storage(() => tx.exec());
  }

  /**
   * A pipeline deploy the sweep failed to settle is looked at again as if made at `at`; only while it is
   * indexed (XX: its announcement may have taken it out meanwhile).
   */
  async pipelineDeployAt(member: string, at: number): Promise<void> {
    await storage(() => this.redis.zadd(keys.pipelineDeploys, 'XX', at, member));
  }

  async forgetPipelineDeploy(member: string): Promise<void> {
    await storage(() => this.redis.zrem(keys.pipelineDeploys, member));
  }

  /**
   * Canaries due to be judged by `now` (as indexed), as `<agentId>/<deployId>` with the score read, the
   * longest due first.
   */
  async canariesDue(now: number, batch: number): Promise<{ member: string; score: number }[]> {
    const flat = await storage(() =>
      this.redis.zrangebyscore(keys.canaries, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch),
    );
    const out: { member: string; score: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) out.push({ member: flat[i]!, score: Number(flat[i + 1]) });
    return out;
  }

  /**
   * The canary is judged again at `at`; only while it is indexed (XX), so a late reschedule never brings back
   * an entry its announced end took out.
   */
  async judgeCanaryAt(member: string, at: number): Promise<void> {
    await storage(() => this.redis.zadd(keys.canaries, 'XX', at, member));
  }

  /**
   * Takes an entry out of the canaries' index; given the `score` it was read (or written) at, only while it
   * still has it: a move to canary that indexed it again meanwhile keeps its entry.
   */
  async forgetCanary(member: string, score?: number): Promise<void> {
    if (score === undefined) await storage(() => this.redis.zrem(keys.canaries, member));
    else await storage(() => this.redis.ssForgetIndexed(keys.canaries, member, String(score)));
  }

  /**
   * Moves up to `batch` entries of the previous version's windows index into the canaries' (due at once):
   * what an instance of that version still writes there during a rolling upgrade. How many it moved.
   */
  async adoptLegacyWindows(now: number, batch: number): Promise<number> {
    const members = await storage(() => this.redis.zrange(keys.legacyCanaryWindows, 0, batch - 1));
    if (members.length === 0) return 0;
    const tx = this.redis.multi();
    for (const m of members) tx.zadd(keys.canaries, 'NX', now, m);
    tx.zrem(keys.legacyCanaryWindows, ...members);
    await storage(() => tx.exec());
    return members.length;
  }

  /**
   * The upgrade's backfill (live/deploy-backfill.ts): up to `count` of the agents that were ever deployed
   * (the subdomains hash names each), from `cursor` (HSCAN; '0' to start, '0' back when done).
   */
  async deployedAgentsPage(cursor: string, count: number): Promise<{ cursor: string; agentIds: string[] }> {
    const [next, flat] = await storage(() => this.redis.hscan(keys.subdomains, cursor, 'COUNT', count));
    const agentIds = new Set<string>();
    for (let i = 1; i < flat.length; i += 2) agentIds.add(flat[i]!);
    return { cursor: next, agentIds: [...agentIds] };
  }

  /**
   * The upgrade's backfill: the agent's deploys from the `from`-th (by number), up to `count`, with what the
   * indexes need of them (one ZRANGE and one pipeline, the agent's slot).
   */
  async deployStates(
    agentId: string,
    from: number,
    count: number,
  ): Promise<{
    read: number;
    states: { id: string; status: string; createdAt: number; external: boolean }[];
  }> {
    return storage(async () => {
      const ids = await this.redis.zrange(keys.deploys(agentId), from, from + count - 1);
      if (ids.length === 0) return { read: 0, states: [] };
      const pipe = this.redis.pipeline();
      for (const id of ids) pipe.hmget(keys.deploy(agentId, id), 'status', 'createdAt', 'external');
      const rows = (await pipe.exec()) ?? [];
      const states = rows.flatMap(([err, row], i) => {
        if (err) throw err;
        const [status, createdAt, external] = row as (string | null)[];
        return status ? [{ id: ids[i]!, status, createdAt: Number(createdAt), external: !!external }] : [];
      });
      return { read: ids.length, states };
    });
  }

  /**
   * The upgrade's backfill: indexes a deploy left pending/building (by its creation, as createDeploy does)
   * and a running canary (due at once), unless indexed already (NX: what the index says stands). One round
   * trip (one slot); how many entries it added.
   */
  async indexDeploys(pipeline: { member: string; createdAt: number }[], canaries: string[], now: number) {
    if (pipeline.length === 0 && canaries.length === 0) return 0;
    const tx = this.redis.multi();
    for (const d of pipeline) tx.zadd(keys.pipelineDeploys, 'NX', d.createdAt, d.member);
    for (const m of canaries) tx.zadd(keys.canaries, 'NX', now, m);
    const replies = (await storage(() => tx.exec())) ?? [];
    return replies.reduce((n, [, added]) => n + Number(added), 0);
  }

  /** Merges call settings into a deploy's (calls started afterwards use them). */
  async setDeploySettings(
    agentId: string,
    deployId: string,
    patch: Partial<DeploySettings>,
  ): Promise<DeployRecord> {
    const current = await this.getDeploy(agentId, deployId);
    const settings: DeploySettings = {
      maxConcurrentCalls: patch.maxConcurrentCalls ?? current.maxConcurrentCalls,
      dailyCallCap: patch.dailyCallCap === undefined ? current.dailyCallCap : patch.dailyCallCap,
      maxCallDurationMs: patch.maxCallDurationMs ?? current.maxCallDurationMs,
      silenceTimeoutMs:
        patch.silenceTimeoutMs === undefined ? current.silenceTimeoutMs : patch.silenceTimeoutMs,
      endCallMessage: patch.endCallMessage ?? current.endCallMessage,
    };
    const flat = await storage(() =>
      this.redis.ssSetDeploySettings(
        keys.deploy(agentId, deployId),
        JSON.stringify(settings),
        String(this.now()),
      ),
    );
    if (flat.length === 0) throw new AppError('NOT_FOUND', `deploy ${deployId} not found`);
    await this.writes.confirm(keys.deploy(agentId, deployId));
    return toDeploy(pairs(flat));
  }

  /** The agent's live deploy, or null. */
  async liveDeploy(agentId: string): Promise<DeployRecord | null> {
    const id = await storage(() => this.redis.hget(keys.deployMeta(agentId), 'live'));
    if (!id) return null;
    const d = await this.getDeploy(agentId, id).catch(() => null);
    return d?.status === 'live' ? d : null;
  }

  /** The agent's running canary, or null. */
  async canaryDeploy(agentId: string): Promise<DeployRecord | null> {
    const id = await storage(() => this.redis.hget(keys.deployMeta(agentId), 'canary'));
    if (!id) return null;
    const d = await this.getDeploy(agentId, id).catch(() => null);
    return d?.status === 'canary' ? d : null;
  }

  /**
   * Which side of the running canary `callerKey` is on: the first draw (`canary` with `percent` %) is kept
   * for `stickyMs` from that call (SET NX PX), so the caller's next calls within it meet the same version.
   */
  async canarySide(
    agentId: string,
    canaryId: string,
    callerKey: string,
    percent: number,
    stickyMs: number,
  ): Promise<'canary' | 'live'> {
    const key = keys.canarySide(agentId, canaryId, callerKey);
    const drawn = Math.random() * 100 < percent ? 'canary' : 'live';
    const replies = await storage(() =>
      this.redis.multi().set(key, drawn, 'PX', stickyMs, 'NX').get(key).exec(),
    );
    const side = replies?.[1]?.[1];
    return side === 'canary' || side === 'live' ? side : drawn;
  }

  /** The agent that holds a subdomain, or null. */
  async agentOfSubdomain(subdomain: string): Promise<string | null> {
    return storage(() => this.redis.hget(keys.subdomains, subdomain));
  }

  /** Every agent that was ever deployed (it has a subdomain): the only ones that can have calls. */
  async deployedAgents(): Promise<string[]> {
    return [...new Set(await storage(() => this.redis.hvals(keys.subdomains)))];
  }
}
