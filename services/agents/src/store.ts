import {
  AppError,
  type Agent,
  type AgentLookup,
  type AgentSummary,
  type AgentVersion,
  type ArchivedAgent,
  type Flow,
  type VersionSummary,
} from '@vab/contracts';
import { RawJson } from '@vab/bus';
import { scanKeys, scriptError, storage, WriteConcern, type RedisClient } from '@vab/storage';
import { createHash, randomUUID } from 'node:crypto';
import { AGENT_KEY, keys } from './redis-keys.js';
import { ARCHIVE, CREATE, GET, PRUNE, RESTORE, UNARCHIVE, UPDATE, VIEW } from './scripts.js';

/** The agent as it is stored, plus the entity tag that identifies this exact state of it. */
export interface StoredAgent {
  agent: Agent;
  etag: string;
}

interface Scripts {
  agentCreate(...keysThenArgv: string[]): Promise<number>;
  agentUpdate(...keysThenArgv: string[]): Promise<string[]>;
  agentRestore(...keysThenArgv: string[]): Promise<string[]>;
  agentArchive(...keysThenArgv: string[]): Promise<[string, string]>;
  agentUnarchive(...keysThenArgv: string[]): Promise<string[]>;
  agentView(...keysThenArgv: string[]): Promise<number>;
  agentPrune(...keysThenArgv: string[]): Promise<number>;
  agentGet(
    k1: string,
    contentPrefix: string,
  ): Promise<[string, string, string, string, string, string] | null>;
}

/** Newest snapshots kept per agent unless configured (the product this API comes from keeps 50). */
export const DEFAULT_MAX_VERSIONS = 50;

/** Ids per HMGET when listing: bounds one command's size on very large lists. */
const LIST_CHUNK = 10_000;

const etagOf = (version: number, rev: number) => `"${version}.${rev}"`;

/** base64url(sha256(json)): 43 characters, the identity of a flow's content within its agent. */
function contentHash(json: string): string {
  return createHash('sha256').update(json).digest('base64url');
}

function parseVersionMember(member: string): VersionSummary {
  const [version, createdAt, hash, size] = member.split(':');
  return {
    version: Number(version),
    createdAt: Number(createdAt),
    contentHash: hash ?? '',
    sizeBytes: Number(size),
  };
}

/** The list's row of an agent, as the list replies it. */
const summaryJson = (id: string, name: string, createdAt: number, updatedAt: number) =>
  JSON.stringify({ id, name, createdAt, updatedAt } satisfies AgentSummary);

export interface AgentStoreOptions {
  now?: () => number;
  /** Replicas a write must reach before it is answered (REDIS_WAIT_REPLICAS); default: none. */
  writes?: WriteConcern;
  /**
   * Called after a save leaves an agent with more snapshots than it keeps: retention runs apart from the
   * request (it asks the sessions service which versions deploys pin).
   */
  onSnapshots?: (id: string, stored: number) => void;
}

const notFound = (id: string) => new AppError('NOT_FOUND', `agent ${id} not found`);

export class AgentStore {
  private readonly redis: RedisClient & Scripts;
  private readonly now: () => number;
  private readonly writes: WriteConcern;
  private readonly onSnapshots: (id: string, stored: number) => void;

  constructor(redis: RedisClient, opts: AgentStoreOptions = {}) {
    redis.defineCommand('agentCreate', { numberOfKeys: 3, lua: CREATE });
    redis.defineCommand('agentUpdate', { numberOfKeys: 3, lua: UPDATE });
    redis.defineCommand('agentRestore', { numberOfKeys: 2, lua: RESTORE });
    redis.defineCommand('agentArchive', { numberOfKeys: 1, lua: ARCHIVE });
    redis.defineCommand('agentUnarchive', { numberOfKeys: 1, lua: UNARCHIVE });
    redis.defineCommand('agentGet', { numberOfKeys: 1, lua: GET });
    redis.defineCommand('agentView', { numberOfKeys: 3, lua: VIEW });
    redis.defineCommand('agentPrune', { numberOfKeys: 2, lua: PRUNE });
    this.redis = redis as RedisClient & Scripts;
    this.now = opts.now ?? Date.now;
    this.writes = opts.writes ?? new WriteConcern(redis, 0, 0);
    this.onSnapshots = opts.onSnapshots ?? (() => {});
  }

  /**
   * Brings the list's view to an agent's state (its own script has run): the second step of every write
   * that changes what the list shows. A request interrupted between the two leaves the view one step
   * behind for that agent until its next write or `repairViews`.
   */
  /**
   * After a script changed an agent (its row: name, createdAt, updatedAt, rev): the write confirmed, then the
   * agent listed as it now is.
   */
  private async confirmListed(id: string, [name, createdAt, updatedAt, rev]: (string | undefined)[]) {
    await this.writes.confirm(keys.agent(id));
    await this.view(
      id,
      Number(rev),
      Number(updatedAt),
      summaryJson(id, name ?? '', Number(createdAt), Number(updatedAt)),
    );
  }

  private async view(id: string, rev: number, updatedAt: number, summary: string, force = false) {
    await storage(() =>
      this.redis.agentView(
        keys.index,
        keys.summaries,
        keys.revs,
        id,
        String(rev),
        String(updatedAt),
        summary,
        force ? '1' : '0',
      ),
    );
  }

  private refusals(id: string) {
    return {
      NOT_FOUND: () => notFound(id),
      VERSION_NOT_FOUND: () => new AppError('NOT_FOUND', `agent ${id} has no such version`),
      PRECONDITION_FAILED: (current: string) =>
        new AppError('PRECONDITION_FAILED', `If-Match does not match the current ETag ${current}`),
      CONFLICT: () => new AppError('CONFLICT', `agent ${id} already exists`),
    };
  }

  async create(name: string, flow: Flow): Promise<StoredAgent> {
    const id = randomUUID();
    const now = this.now();
    const json = JSON.stringify(flow);
    const hash = contentHash(json);
    try {
      await this.redis.agentCreate(
        keys.agent(id),
        keys.versions(id),
        keys.content(id, hash),
        id,
        name,
        String(now),
        hash,
        json,
        String(Buffer.byteLength(json)),
      );
    } catch (err) {
      throw scriptError(err, this.refusals(id));
    }
    await this.writes.confirm(keys.agent(id));
    await this.view(id, 1, now, summaryJson(id, name, now, now));
    return { agent: { id, name, createdAt: now, updatedAt: now, version: 1, flow }, etag: etagOf(1, 1) };
  }

  /**
   * Two reads whatever the number of agents: the index, then every listed agent's pre-built summary in one
   * HMGET, joined into the reply JSON without parsing.
   */
  async list(): Promise<RawJson<AgentSummary[]>> {
    return storage(async () => {
      const ids = await this.redis.zrevrange(keys.index, 0, -1);
      if (ids.length === 0) return new RawJson<AgentSummary[]>('[]');
      const rows: (string | null)[] = [];
      for (let i = 0; i < ids.length; i += LIST_CHUNK) {
        rows.push(...(await this.redis.hmget(keys.summaries, ...ids.slice(i, i + LIST_CHUNK))));
      }
      // An agent archived between the two reads has no summary any more: left out, not shown half-read.
      return new RawJson<AgentSummary[]>(`[${rows.filter((r) => r !== null).join(',')}]`);
    });
  }

  /**
   * Rebuilds the list's view from the agents' own hashes, in batches (SCAN over every master): the repair
   * after interrupted writes left it behind, and the move of the view from the keys it had before it got
   * its own slot (`keys.legacy`, removed once rebuilt). Safe while the service serves: an agent written
   * meanwhile has a higher rev, which VIEW keeps. Returns how many agents it looked at.
   */
  async repairViews(): Promise<{ agents: number; listed: number }> {
    let agents = 0;
    let listed = 0;
    for await (const found of scanKeys(this.redis, 'ag:{*}')) {
      const ids = found.flatMap((k) => AGENT_KEY.exec(k)?.[1] ?? []).filter((id) => id !== 'views');
      // one command per agent, not a pipeline: on a cluster the agents' keys sit in different slots
      const rows = await storage(() =>
        Promise.all(
          ids.map((id) =>
            this.redis.hmget(keys.agent(id), 'name', 'createdAt', 'updatedAt', 'archived', 'rev'),
          ),
        ),
      );
      // the batch's view updates at once: all go to the one `{views}` slot, in one round trip's time
      await Promise.all(
        rows.map(async ([name, createdAt, updatedAt, archived, rev], i) => {
          const id = ids[i]!;
          if (name === null || name === undefined) return;
          agents++;
          const live = archived !== '1';
          if (live) listed++;
          const summary = live ? summaryJson(id, name, Number(createdAt), Number(updatedAt)) : '';
          await this.view(id, Number(rev ?? 1), Number(updatedAt), summary, true);
        }),
      );
    }
    // index entries of agents that are gone entirely (none are deleted today; a hand-edited store may have them)
    const indexed = await storage(() => this.redis.zrange(keys.index, 0, -1));
    for (let i = 0; i < indexed.length; i += LIST_CHUNK) {
      const chunk = indexed.slice(i, i + LIST_CHUNK);
      const exists = await storage(() => Promise.all(chunk.map((id) => this.redis.exists(keys.agent(id)))));
      const orphans = chunk.filter((_, j) => exists[j] === 0);
      if (orphans.length > 0) {
        await storage(() =>
          this.redis
            .multi()
            .zrem(keys.index, ...orphans)
            .hdel(keys.summaries, ...orphans)
            .exec(),
        );
      }
    }
    for (const legacy of keys.legacy) await storage(() => this.redis.unlink(legacy));
    return { agents, listed };
  }

  /** True when the view still sits in the keys it had before it got its own slot. */
  async hasLegacyView(): Promise<boolean> {
    return (await storage(() => this.redis.exists(keys.legacy[0]!))) === 1;
  }

  /**
   * Retention for one agent: removes its oldest snapshots beyond the newest `keep`, never one of `pinned`
   * (versions deploy records name) nor the latest, in batches of `batch`. Returns how many went.
   */
  async prune(id: string, keep: number, pinned: number[], batch = 100): Promise<number> {
    let total = 0;
    for (;;) {
      const removed = await storage(() =>
        this.redis.agentPrune(
          keys.agent(id),
          keys.versions(id),
          keys.content(id, ''),
          String(keep),
          String(batch),
          pinned.join(','),
        ),
      );
      total += removed;
      if (removed < batch) return total;
    }
  }

  /**
   * The agent as reply JSON built around the stored flow JSON: reads are the hottest path, and parsing the
   * flow only for the bus to serialize it again is work done twice.
   */
  async get(id: string): Promise<{ agent: RawJson<Agent>; etag: string }> {
    return storage(async () => {
      const row = await this.redis.agentGet(keys.agent(id), keys.content(id, ''));
      if (row === null) throw notFound(id);
      const [name, createdAt, updatedAt, version, rev, flowJson] = row;
      const json =
        `{"id":${JSON.stringify(id)},"name":${JSON.stringify(name)},"createdAt":${Number(createdAt)},` +
        `"updatedAt":${Number(updatedAt)},"version":${Number(version)},"flow":${flowJson}}`;
      return { agent: new RawJson<Agent>(json), etag: etagOf(Number(version), Number(rev)) };
    });
  }

  async update(
    id: string,
    patch: { name?: string | undefined; flow?: Flow | undefined },
    ifMatch = '',
  ): Promise<StoredAgent> {
    const json = patch.flow ? JSON.stringify(patch.flow) : '';
    const hash = patch.flow ? contentHash(json) : '';
    let row: string[];
    try {
      row = await this.redis.agentUpdate(
        keys.agent(id),
        keys.versions(id),
        patch.flow ? keys.content(id, hash) : keys.versions(id),
        id,
        String(this.now()),
        ifMatch,
        patch.name ?? '',
        hash,
        json,
        String(Buffer.byteLength(json)),
      );
    } catch (err) {
      throw scriptError(err, this.refusals(id));
    }
    return this.afterSave(id, row, patch.flow);
  }

  async restore(id: string, version: number, ifMatch = ''): Promise<StoredAgent> {
    let row: string[];
    try {
      row = await this.redis.agentRestore(
        keys.agent(id),
        keys.versions(id),
        id,
        String(this.now()),
        ifMatch,
        String(version),
      );
    } catch (err) {
      throw scriptError(err, this.refusals(id));
    }
    return this.afterSave(id, row, undefined);
  }

  async archive(id: string): Promise<Omit<ArchivedAgent, 'stoppedDeploy'>> {
    let at: string;
    let rev: string;
    try {
      [at, rev] = await this.redis.agentArchive(keys.agent(id), id, String(this.now()), '');
    } catch (err) {
      throw scriptError(err, this.refusals(id));
    }
    await this.writes.confirm(keys.agent(id));
    await this.view(id, Number(rev), Number(at), '');
    return { id, archived: true, archivedAt: Number(at) };
  }

  /**
   * Undoes `archive` (the one that answered `archivedAt`): the agent is active and listed again, as if the
   * archive had not been asked. For an archive whose second step failed.
   */
  async unarchive(id: string, archivedAt: number): Promise<void> {
    const row = await storage(() => this.redis.agentUnarchive(keys.agent(id), String(archivedAt)));
    const [name, createdAt, updatedAt, rev] = row;
    if (rev === undefined) return;
    await this.confirmListed(id, [name, createdAt, updatedAt, rev]);
  }

  async lookup(id: string): Promise<AgentLookup> {
    return storage(async () => {
      const [name, version, archived] = await this.redis.hmget(keys.agent(id), 'name', 'version', 'archived');
      if (name == null) return { id, exists: false, archived: false };
      return { id, exists: true, archived: archived === '1', name, version: Number(version) };
    });
  }

  async versions(id: string): Promise<VersionSummary[]> {
    return storage(async () => {
      const res = await this.redis
        .multi()
        .hget(keys.agent(id), 'archived')
        .zrange(keys.versions(id), 0, -1)
        .exec();
      const archived = res?.[0]?.[1] as string | null;
      if (archived === null || archived === '1') throw notFound(id);
      return ((res?.[1]?.[1] as string[]) ?? []).map(parseVersionMember);
    });
  }

  async version(id: string, version: number): Promise<AgentVersion> {
    return storage(async () => {
      const res = await this.redis
        .multi()
        .hget(keys.agent(id), 'archived')
        .zrangebyscore(keys.versions(id), version, version)
        .exec();
      const archived = res?.[0]?.[1] as string | null;
      if (archived === null || archived === '1') throw notFound(id);
      const member = (res?.[1]?.[1] as string[] | undefined)?.[0];
      if (!member) throw new AppError('NOT_FOUND', `agent ${id} has no version ${version}`);
      const summary = parseVersionMember(member);
      return { ...summary, agentId: id, flow: await this.loadContent(id, summary.contentHash) };
    });
  }

  private async loadContent(id: string, hash: string): Promise<Flow> {
    const json = await this.redis.get(keys.content(id, hash));
    if (json === null) throw new Error(`content ${hash} of agent ${id} is missing`);
    return JSON.parse(json) as Flow;
  }

  /** After an update or restore script: confirm, the view, retention's cue, the answer. */
  private async afterSave(id: string, row: string[], flow: Flow | undefined): Promise<StoredAgent> {
    const [name, createdAt, updatedAt, version, rev, head, snapshots, changed] = row;
    if (changed === '1') {
      await this.confirmListed(id, [name, createdAt, updatedAt, rev]);
      this.onSnapshots(id, Number(snapshots));
    }
    const content = flow ?? (await storage(() => this.loadContent(id, head ?? '')));
    return {
      agent: {
        id,
        name: name ?? '',
        createdAt: Number(createdAt),
        updatedAt: Number(updatedAt),
        version: Number(version),
        flow: content,
      },
      etag: etagOf(Number(version), Number(rev)),
    };
  }
}
