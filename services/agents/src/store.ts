import {
  AppError,
  type Agent,
  type AgentLookup,
  type AgentSummary,
  type AgentVersion,
  type Flow,
  type VersionSummary,
} from '@vab/contracts';
import { RawJson } from '@vab/bus';
import { scriptError, storage, type Redis } from '@vab/storage';
import { createHash, randomUUID } from 'node:crypto';
import { keys } from './keys.js';
import { ARCHIVE, CREATE, GET, RESTORE, UPDATE } from './scripts.js';

/** The agent as it is stored, plus the entity tag that identifies this exact state of it. */
export interface StoredAgent {
  agent: Agent;
  etag: string;
}

interface Scripts {
  agentCreate(...keysThenArgv: string[]): Promise<number>;
  agentUpdate(...keysThenArgv: string[]): Promise<string[]>;
  agentRestore(...keysThenArgv: string[]): Promise<string[]>;
  agentArchive(...keysThenArgv: string[]): Promise<string>;
  agentGet(
    k1: string,
    contentPrefix: string,
  ): Promise<[string, string, string, string, string, string] | null>;
}

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

const notFound = (id: string) => new AppError('NOT_FOUND', `agent ${id} not found`);

export class AgentStore {
  private readonly redis: Redis & Scripts;

  constructor(
    redis: Redis,
    private readonly now: () => number = Date.now,
  ) {
    redis.defineCommand('agentCreate', { numberOfKeys: 5, lua: CREATE });
    redis.defineCommand('agentUpdate', { numberOfKeys: 5, lua: UPDATE });
    redis.defineCommand('agentRestore', { numberOfKeys: 4, lua: RESTORE });
    redis.defineCommand('agentArchive', { numberOfKeys: 3, lua: ARCHIVE });
    redis.defineCommand('agentGet', { numberOfKeys: 1, lua: GET });
    this.redis = redis as Redis & Scripts;
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
        keys.index,
        keys.summaries,
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
    return { agent: { id, name, createdAt: now, updatedAt: now, version: 1, flow }, etag: etagOf(1, 1) };
  }

  /**
   * Two reads whatever the number of agents: the index, then every listed agent's pre-built summary in one
   * HMGET, joined into the reply JSON without parsing. An agent whose summary is missing (stored before
   * summaries existed) is read from its hash once and its summary written back.
   */
  async list(): Promise<RawJson<AgentSummary[]>> {
    return storage(async () => {
      const ids = await this.redis.zrevrange(keys.index, 0, -1);
      if (ids.length === 0) return new RawJson<AgentSummary[]>('[]');
      const rows: (string | null)[] = [];
      for (let i = 0; i < ids.length; i += LIST_CHUNK) {
        rows.push(...(await this.redis.hmget(keys.summaries, ...ids.slice(i, i + LIST_CHUNK))));
      }
      const missing = ids.filter((_, i) => rows[i] === null);
      if (missing.length > 0) {
        const rebuilt = await this.rebuildSummaries(missing);
        ids.forEach((id, i) => {
          if (rows[i] === null) rows[i] = rebuilt.get(id) ?? null;
        });
      }
      // An agent archived between the two reads has no summary any more: left out, not shown half-read.
      return new RawJson<AgentSummary[]>(`[${rows.filter((r) => r !== null).join(',')}]`);
    });
  }

  private async rebuildSummaries(ids: string[]): Promise<Map<string, string>> {
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.hmget(keys.agent(id), 'name', 'createdAt', 'updatedAt', 'archived');
    const rows = (await pipe.exec()) ?? [];
    const out = new Map<string, string>();
    rows.forEach(([err, row], i) => {
      if (err) throw err;
      const [name, createdAt, updatedAt, archived] = row as (string | null)[];
      if (name === null || name === undefined || archived === '1') return;
      const summary: AgentSummary = {
        id: ids[i]!,
        name,
        createdAt: Number(createdAt),
        updatedAt: Number(updatedAt),
      };
      out.set(summary.id, JSON.stringify(summary));
    });
    // HSETNX: a script may have written a newer summary meanwhile, which must win
    if (out.size > 0) {
      const write = this.redis.pipeline();
      for (const [id, json] of out) write.hsetnx(keys.summaries, id, json);
      await write.exec();
    }
    return out;
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
        keys.index,
        keys.summaries,
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
    return this.fromScriptRow(id, row, patch.flow);
  }

  async restore(id: string, version: number, ifMatch = ''): Promise<StoredAgent> {
    let row: string[];
    try {
      row = await this.redis.agentRestore(
        keys.agent(id),
        keys.versions(id),
        keys.index,
        keys.summaries,
        id,
        String(this.now()),
        ifMatch,
        String(version),
      );
    } catch (err) {
      throw scriptError(err, this.refusals(id));
    }
    return this.fromScriptRow(id, row, undefined);
  }

  async archive(id: string): Promise<{ id: string; archived: true; archivedAt: number }> {
    try {
      const at = await this.redis.agentArchive(
        keys.agent(id),
        keys.index,
        keys.summaries,
        id,
        String(this.now()),
        '',
      );
      return { id, archived: true, archivedAt: Number(at) };
    } catch (err) {
      throw scriptError(err, this.refusals(id));
    }
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

  private async fromScriptRow(id: string, row: string[], flow: Flow | undefined): Promise<StoredAgent> {
    const [name, createdAt, updatedAt, version, rev, head] = row;
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
