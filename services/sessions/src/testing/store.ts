import {
  calledModel,
  AppError,
  METRIC_NAMES,
  USAGE_FIELDS,
  type CaseResult,
  type MetricName,
  type ModelUsage,
  type SessionUsage,
  type TestCase,
  type UsageByRole,
  type TestRun,
  type TestRunStatus,
} from '@vab/contracts';
import { boundResult, caseSummary } from './bound.js';
import { scriptError, storage, type RedisClient } from '@vab/storage';
import { keys } from '../redis-keys.js';

/** KEYS: case index, case key. ARGV: caseId, createdAt, json, max. Refuses past `max` cases. */
const CREATE_CASE = `
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return redis.error_reply('LIMIT_EXCEEDED') end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
`;

/**
 * KEYS: run. ARGV: field, result json, updatedAt. One case's result, into a run that still exists (one the
 * agent's run cap removed is not brought back as a stray hash). `meta` is not touched: a driver writing a
 * result can never undo the `finishedAt` a sweep wrote meanwhile.
 */
const SET_CASE_RESULT = `
if redis.call('HEXISTS', KEYS[1], 'meta') == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], 'updatedAt', ARGV[3])
return 1
`;

/** What a run record holds besides its cases' results and `updatedAt` (a field of its own). */
export interface RunMeta {
  id: string;
  agentId: string;
  version: number;
  caseIds: string[];
  createdAt: number;
  finishedAt: number | null;
  sinceLastPass?: TestRun['sinceLastPass'];
  latencyChange?: TestRun['latencyChange'];
}

/**
 * The p50 (nearest rank) of each figure over a run's agent turns that called a model: exact, a run has few
 * turns.
 */
export function runLatency(cases: CaseResult[]): TestRun['latency'] {
  const values = new Map<MetricName, number[]>();
  for (const c of cases) {
    for (const m of c.observed?.metrics ?? []) {
      if (!calledModel(m)) continue;
      for (const name of METRIC_NAMES) {
        const v = m[name];
        if (v !== undefined) values.set(name, [...(values.get(name) ?? []), v]);
      }
    }
  }
  const latency: TestRun['latency'] = {};
  for (const [name, vs] of values) {
    vs.sort((a, b) => a - b);
    latency[name] = vs[Math.max(0, Math.ceil(vs.length / 2) - 1)]!;
  }
  return latency;
}

/** A stored case as today's schema reads it: cases written before simulations have none of their fields. */
export function readCase(json: string): TestCase {
  const c = JSON.parse(json) as Partial<TestCase> & Omit<TestCase, keyof typeof CASE_DEFAULTS>;
  return { ...CASE_DEFAULTS, ...c };
}
const CASE_DEFAULTS = {
  simulation: null,
  mocks: {},
  criteria: [],
  judgeModel: null,
  repeat: 1,
  minPassRate: 1,
} satisfies Partial<TestCase>;

/** The case results' usage, summed per role and per provider and model. */
export function runUsage(cases: CaseResult[]): UsageByRole {
  const sum = (role: keyof UsageByRole): SessionUsage => {
    const byModel = new Map<string, ModelUsage>();
    for (const c of cases) {
      for (const a of c.repeats ?? []) {
        for (const u of a.observed?.usage?.[role] ?? []) {
          const key = `${u.kind} ${u.provider} ${u.model}`;
          const t = byModel.get(key) ?? { kind: u.kind, provider: u.provider, model: u.model };
          for (const f of USAGE_FIELDS) {
            if (u[f] !== undefined) t[f] = (t[f] ?? 0) + u[f];
          }
          byModel.set(key, t);
        }
      }
    }
    return [...byModel.values()].slice(0, 100);
  };
  return { agent: sum('agent'), simulator: sum('simulator'), judge: sum('judge') };
}

interface Scripts {
  ssCreateCase(k1: string, k2: string, ...argv: string[]): Promise<number>;
  ssSetCaseResult(k1: string, ...argv: string[]): Promise<number>;
}

/** The status a run's case results add up to. */
export function runStatus(meta: RunMeta, cases: CaseResult[]): TestRunStatus {
  if (meta.finishedAt === null) {
    return cases.some((c) => c.verdict !== 'queued') ? 'running' : 'queued';
  }
  if (cases.some((c) => c.verdict === 'errored')) return 'errored';
  if (cases.some((c) => c.verdict === 'failed')) return 'failed';
  return 'passed';
}

/** What of a run's cases an answer carries: all, summaries only (the list), or a page within a byte budget. */
type RunView = { all: true } | { summary: true } | { from: number; budgetBytes: number };

/**
 * The cases of a page: from `from` on, as many as fit in `budgetBytes` of stored JSON (always at least one),
 * and where the next page starts (null: this was the last).
 */
function pageOf(jsons: string[], from: number, budgetBytes: number): { idx: number[]; next: number | null } {
  const idx: number[] = [];
  let bytes = 0;
  for (let i = from; i < jsons.length; i++) {
    const size = Buffer.byteLength(jsons[i]!);
    if (idx.length > 0 && bytes + size > budgetBytes) return { idx, next: i };
    idx.push(i);
    bytes += size;
  }
  return { idx, next: null };
}

function toRun(h: Record<string, string>, view: RunView = { all: true }): TestRun | undefined {
  if (!h.meta) return undefined;
  const meta = JSON.parse(h.meta) as RunMeta;
  const jsons = meta.caseIds.flatMap((id) => {
    const json = h[`case:${id}`];
    return json ? [json] : [];
  });
  const cases = jsons.map((json) => JSON.parse(json) as CaseResult);
  let shown = cases;
  let page: { casesFrom: number; nextCasesFrom: number | null } | undefined;
  if ('summary' in view) shown = cases.map(caseSummary);
  else if ('from' in view) {
    const { idx, next } = pageOf(jsons, view.from, view.budgetBytes);
    shown = idx.map((i) => cases[i]!);
    page = { casesFrom: view.from, nextCasesFrom: next };
  }
  const count = (v: CaseResult['verdict']) => cases.filter((c) => c.verdict === v).length;
  return {
    id: meta.id,
    agentId: meta.agentId,
    version: meta.version,
    status: runStatus(meta, cases),
    counts: {
      total: cases.length,
      queued: count('queued'),
      running: count('running'),
      passed: count('passed'),
      failed: count('failed'),
      errored: count('errored'),
    },
    cases: shown,
    ...(page ?? {}),
    createdAt: meta.createdAt,
    updatedAt: Number(h.updatedAt ?? meta.createdAt),
    finishedAt: meta.finishedAt,
    sinceLastPass: meta.sinceLastPass ?? null,
    latency: runLatency(cases),
    latencyChange: meta.latencyChange ?? null,
    usage: runUsage(cases),
  };
}

/**
 * Regression test cases and runs, in the agent's slot: a case is one JSON string (`ss:{a}:tc:<id>`, indexed
 * by creation time), a run one hash (`ss:{a}:tr:<id>`: `meta` and one `case:<id>` field per case, so
 * results from several playground instances land without overwriting each other).
 */
export class TestingStore {
  private readonly redis: RedisClient & Scripts;

  constructor(
    redis: RedisClient,
    private readonly limits: { maxCases: number; maxRuns: number },
    private readonly now: () => number = Date.now,
  ) {
    redis.defineCommand('ssCreateCase', { numberOfKeys: 2, lua: CREATE_CASE });
    redis.defineCommand('ssSetCaseResult', { numberOfKeys: 1, lua: SET_CASE_RESULT });
    this.redis = redis as RedisClient & Scripts;
  }

  // ---- cases ----

  async createCase(c: TestCase): Promise<TestCase> {
    try {
      await this.redis.ssCreateCase(
        keys.cases(c.agentId),
        keys.case(c.agentId, c.id),
        c.id,
        String(c.createdAt),
        JSON.stringify(c),
        String(this.limits.maxCases),
      );
    } catch (err) {
      throw scriptError(err, {
        LIMIT_EXCEEDED: () =>
          new AppError('LIMIT_EXCEEDED', `an agent has at most ${this.limits.maxCases} test cases`),
      });
    }
    return c;
  }

  /** Oldest first; `undefined` when the agent has none. */
  async listCases(agentId: string): Promise<TestCase[] | undefined> {
    return storage(async () => {
      const ids = await this.redis.zrange(keys.cases(agentId), 0, -1);
      if (ids.length === 0) return undefined;
      const rows = await this.redis.mget(...ids.map((id) => keys.case(agentId, id)));
      return rows.flatMap((r) => (r === null ? [] : [readCase(r)]));
    });
  }

  async getCase(agentId: string, caseId: string): Promise<TestCase> {
    const json = await storage(() => this.redis.get(keys.case(agentId, caseId)));
    if (json === null) throw new AppError('NOT_FOUND', `test case ${caseId} not found`);
    return readCase(json);
  }

  /** The cases of `ids` that exist, in that order. */
  async casesById(agentId: string, ids: string[]): Promise<TestCase[]> {
    if (ids.length === 0) return [];
    const rows = await storage(() => this.redis.mget(...ids.map((id) => keys.case(agentId, id))));
    return rows.flatMap((r) => (r === null ? [] : [readCase(r)]));
  }

  async caseIds(agentId: string): Promise<string[]> {
    return storage(() => this.redis.zrange(keys.cases(agentId), 0, -1));
  }

  /** Last write wins (a case is edited by one builder at a time). */
  async putCase(c: TestCase): Promise<void> {
    await storage(() => this.redis.set(keys.case(c.agentId, c.id), JSON.stringify(c), 'XX'));
  }

  async deleteCase(agentId: string, caseId: string): Promise<void> {
    await storage(() =>
      this.redis.multi().del(keys.case(agentId, caseId)).zrem(keys.cases(agentId), caseId).exec(),
    );
  }

  // ---- runs ----

  /** Records a new run with every case queued; beyond `maxRuns` per agent the oldest ones go. */
  async createRun(meta: RunMeta, cases: CaseResult[], deadline: number): Promise<TestRun> {
    const fields: Record<string, string> = { meta: JSON.stringify(meta), updatedAt: String(meta.createdAt) };
    for (const c of cases) fields[`case:${c.caseId}`] = JSON.stringify(c);
    await storage(() =>
      this.redis
        .multi()
        .hset(keys.run(meta.agentId, meta.id), fields)
        .zadd(keys.runs(meta.agentId), meta.createdAt, meta.id)
        .exec(),
    );
    // swept unless its driver beats before `deadline`: a run is never left queued by an instance that died
    await this.heartbeat(meta.agentId, meta.id, deadline);
    await this.trimRuns(meta.agentId);
    return toRun(fields)!;
  }

  private async trimRuns(agentId: string): Promise<void> {
    const ids = await storage(() => this.redis.zrevrange(keys.runs(agentId), this.limits.maxRuns, -1));
    if (ids.length === 0) return;
    await storage(() =>
      this.redis
        .multi()
        .unlink(...ids.map((id) => keys.run(agentId, id)))
        .zrem(keys.runs(agentId), ...ids)
        .exec(),
    );
  }

  async setCaseResult(agentId: string, runId: string, result: CaseResult): Promise<void> {
    await storage(() =>
      this.redis.ssSetCaseResult(
        keys.run(agentId, runId),
        `case:${result.caseId}`,
        // bounded as stored: every run stays readable, whatever its conversations said
        JSON.stringify(boundResult(result)),
        String(this.now()),
      ),
    );
  }

  async finishRun(
    agentId: string,
    runId: string,
    found: Pick<RunMeta, 'sinceLastPass' | 'latencyChange'> = {},
  ): Promise<void> {
    const meta = await this.meta(agentId, runId);
    if (meta && meta.finishedAt === null) {
      meta.finishedAt = this.now();
      if (found.sinceLastPass) meta.sinceLastPass = found.sinceLastPass;
      if (found.latencyChange) meta.latencyChange = found.latencyChange;
      await storage(() =>
        this.redis.hset(keys.run(agentId, runId), {
          meta: JSON.stringify(meta),
          updatedAt: String(meta.finishedAt),
        }),
      );
    }
    await storage(() => this.redis.zrem(keys.activeRuns, `${agentId}/${runId}`));
  }

  private async meta(agentId: string, runId: string): Promise<RunMeta | undefined> {
    const json = await storage(() => this.redis.hget(keys.run(agentId, runId), 'meta'));
    return json ? (JSON.parse(json) as RunMeta) : undefined;
  }

  /**
   * The driver of a run is alive until `deadline` (epoch ms): it moves the deadline on with each heartbeat.
   * Each run carries its own, so instances with different heartbeat settings never judge each other's.
   */
  async heartbeat(agentId: string, runId: string, deadline: number): Promise<void> {
    await storage(() => this.redis.zadd(keys.activeRuns, deadline, `${agentId}/${runId}`));
  }

  /** Runs whose driver's deadline has passed: `[agentId, runId]`. */
  async staleRuns(now: number): Promise<[string, string][]> {
    const members = await storage(() => this.redis.zrangebyscore(keys.activeRuns, '-inf', `(${now}`));
    return members.map((m) => m.split('/') as [string, string]);
  }

  /**
   * A run as GET answers it: its cases from `from` on, as many as fit in `budgetBytes` (at least one), with
   * where the next page starts — no answer is larger than the bus carries, however many cases and repeats.
   */
  async readRun(agentId: string, runId: string, from: number, budgetBytes: number): Promise<TestRun> {
    const run = toRun(await storage(() => this.redis.hgetall(keys.run(agentId, runId))), {
      from,
      budgetBytes,
    });
    if (!run) throw new AppError('NOT_FOUND', `test run ${runId} not found`);
    return run;
  }

  /** The run list's answer: every run with its counts and each case's verdict, no per-case details. */
  async listRunSummaries(agentId: string): Promise<TestRun[] | undefined> {
    return this.readRuns(agentId, { summary: true });
  }

  async getRun(agentId: string, runId: string): Promise<TestRun> {
    const run = toRun(await storage(() => this.redis.hgetall(keys.run(agentId, runId))));
    if (!run) throw new AppError('NOT_FOUND', `test run ${runId} not found`);
    return run;
  }

  /** Newest first; `undefined` when the agent has none. */
  async listRuns(agentId: string): Promise<TestRun[] | undefined> {
    return this.readRuns(agentId, { all: true });
  }

  private async readRuns(agentId: string, view: RunView): Promise<TestRun[] | undefined> {
    return storage(async () => {
      const ids = await this.redis.zrevrange(keys.runs(agentId), 0, -1);
      if (ids.length === 0) return undefined;
      const pipe = this.redis.pipeline();
      for (const id of ids) pipe.hgetall(keys.run(agentId, id));
      const rows = (await pipe.exec()) ?? [];
      return rows.flatMap(([err, h]) => {
        if (err) throw err;
        const run = toRun(h as Record<string, string>, view);
        return run ? [run] : [];
      });
    });
  }

  // ---- the deploy gate ----

  async gate(agentId: string): Promise<boolean> {
    return (await storage(() => this.redis.hget(keys.deployMeta(agentId), 'gate'))) === '1';
  }

  async setGate(agentId: string, enabled: boolean): Promise<void> {
    await storage(() => this.redis.hset(keys.deployMeta(agentId), 'gate', enabled ? '1' : '0'));
  }
}
