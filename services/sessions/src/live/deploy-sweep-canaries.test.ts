import type { AgentLookup, DeployRecord } from '@vab/contracts';
import { createLogger } from '@vab/service-kit';
import { Redis } from '@vab/storage';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { AgentsDirectory } from '../agents-directory.js';
import { DEFAULT_LIMITS } from '../config.js';
import { SessionsStore } from '../store.js';
import { CallsStore } from './calls-store.js';
import { CanaryJudge } from './canary.js';
import { DeploySweep } from './deploy-sweep.js';
import type { LiveDeploys } from './live-deploys.js';
import type { DeployPipeline } from './pipeline.js';
import { redisStores } from '../../test/redis-stores.js';

/**
 * Every running canary is in the deploy sweep's index (`ss:{deploys}:canaries`) until it ends, judged at each
 * pass it is due: due again an interval later, its window's end at the latest; gone once it is promoted (by
 * hand or by its window), rolled back, superseded or stopped with its archived agent. Real redis-server.
 */

const stores = redisStores();
let redis: Redis;
let store: SessionsStore;
let calls: CallsStore;
const announced: string[] = [];
let judge: CanaryJudge;
let sweep: DeploySweep;
const INTERVAL = 15_000;
const CANARIES = 'ss:{deploys}:canaries';

beforeAll(async () => {
  ({ redis, store, calls } = stores);
  const log = createLogger('sessions', 'silent');
  const told = async (deploy: DeployRecord, type: string) => {
    announced.push(`${type} ${deploy.id}`);
    await store.announced(deploy.agentId, deploy.id, deploy.status);
    return true;
  };
  const pipeline = {
    announce: told,
    publishLive: (deploy: DeployRecord) => told(deploy, 'deploy.live'),
  } as unknown as DeployPipeline;
  const agents = {
    lookup: async (id: string): Promise<AgentLookup> => ({ id, exists: true, archived: false }),
    requireActive: async (id: string): Promise<AgentLookup> => ({ id, exists: true, archived: false }),
  } as unknown as AgentsDirectory;
  const liveDeploys = { put: async () => undefined, remove: async () => undefined } as unknown as LiveDeploys;
  const rule = { minCalls: 20, maxSlowdownMs: 300 };
  judge = new CanaryJudge({ store, calls, pipeline, agents, liveDeploys, log, rule });
  sweep = new DeploySweep(
    { store, calls, canary: judge, pipeline, agents, liveDeploys, redis, log },
    { intervalMs: INTERVAL, interruptedAfterMs: 60_000 },
  );
});

async function withCanary(agentId: string, canaryWindowMs?: number) {
  const live = await store.createDeploy(agentId, 1, agentId);
  await store.updateDeploy(agentId, live.id, 'building');
  await store.updateDeploy(agentId, live.id, 'live');
  const next = await store.createDeploy(agentId, 2, agentId, undefined, false, {
    trafficPercent: 10,
    ...(canaryWindowMs ? { canaryWindowMs } : {}),
  });
  await store.updateDeploy(agentId, next.id, 'building');
  const canary = await store.updateDeploy(agentId, next.id, 'canary');
  return { live, canary, member: `${agentId}/${canary.id}` };
}

const score = (member: string) => redis.zscore(CANARIES, member).then((s) => (s === null ? null : Number(s)));

describe("the deploy sweep's canaries", () => {
  it('are indexed with or without a window, judged when due, and due again an interval later', async () => {
    const plain = await withCanary('a-plain');
    const windowed = await withCanary('a-windowed', 10_000);
    for (const c of [plain, windowed]) expect(await score(c.member)).toBeLessThanOrEqual(Date.now());

    const now = Date.now();
    await sweep.sweep(now);
    expect(await score(plain.member)).toBe(now + INTERVAL);
    // its window ends before the next interval: due then
    expect(await score(windowed.member)).toBe(windowed.canary.liveAt! + 10_000);
    // not due: left as it is
    await sweep.sweep(now + 1_000);
    expect(await score(plain.member)).toBe(now + INTERVAL);
    expect(await store.getDeploy('a-plain', plain.canary.id)).toMatchObject({ status: 'canary' });
    expect(announced).toEqual([]);
  });

  it('leave the index once promoted by hand, superseded or stopped, and their figures with them', async () => {
    const byHand = await withCanary('a-by-hand');
    await judge.promote('a-by-hand', byHand.canary.id, 'hand');
    expect(announced).toContain(`deploy.live ${byHand.canary.id}`);
    expect(await score(byHand.member)).toBeNull();

    const superseded = await withCanary('a-superseded');
    const newer = await store.createDeploy('a-superseded', 3, 'a-superseded');
    await store.updateDeploy('a-superseded', newer.id, 'building');
    await store.updateDeploy('a-superseded', newer.id, 'live');
    const archived = await withCanary('a-archived');
    await store.stopLiveDeploy('a-archived', 'agent archived');
    // still indexed: the sweep finds them ended, with nothing of theirs to tell
    expect(await score(superseded.member)).not.toBeNull();
    expect(await score(archived.member)).not.toBeNull();
    announced.length = 0;
    await sweep.sweep(Date.now() + INTERVAL);
    expect(await score(superseded.member)).toBeNull();
    expect(await score(archived.member)).toBeNull();
    expect(announced).toEqual([]);
    for (const agentId of ['a-by-hand', 'a-superseded', 'a-archived']) {
      expect(await redis.keys(`ss:{${agentId}}:cj*`)).toEqual([]);
    }
  });

  it("take in the previous version's windows index, and promote after the window", async () => {
    const old = await withCanary('a-old', 600_000);
    // as the previous version indexed it
    await redis.zrem(CANARIES, old.member);
    await redis.zadd('ss:{deploys}:windows', old.canary.liveAt! + 600_000, old.member);
    const now = Date.now();
    await sweep.sweep(now);
    expect(await redis.zcard('ss:{deploys}:windows')).toBe(0);
    expect(await score(old.member)).toBe(now + INTERVAL);
    expect(await store.getDeploy('a-old', old.canary.id)).toMatchObject({ status: 'canary' });
    // the window over (the judge reads the clock: the record says it went canary that long ago)
    await redis.hset(`ss:{a-old}:dep:${old.canary.id}`, 'liveAt', String(old.canary.liveAt! - 600_000));
    await sweep.sweep(now + INTERVAL);
    expect(await store.getDeploy('a-old', old.canary.id)).toMatchObject({
      status: 'live',
      promoted: { by: 'window' },
    });
    expect(await score(old.member)).toBeNull();
  });

  it('leave no entry for a move to canary that was refused', async () => {
    // an idempotent PATCH {status: 'live'} retried after the promotion asks for a move to canary again
    const promoted = await withCanary('a-retried');
    await judge.promote('a-retried', promoted.canary.id, 'hand');
    await expect(store.updateDeploy('a-retried', promoted.canary.id, 'canary')).rejects.toMatchObject({
      code: 'ILLEGAL_TRANSITION',
    });
    expect(await score(promoted.member)).toBeNull();
    // nothing live beside it
    const alone = await store.createDeploy('a-alone', 1, 'a-alone');
    await store.updateDeploy('a-alone', alone.id, 'building');
    await expect(store.updateDeploy('a-alone', alone.id, 'canary')).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    expect(await score(`a-alone/${alone.id}`)).toBeNull();
    await expect(store.updateDeploy('a-alone', 'nope', 'canary')).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    expect(await score('a-alone/nope')).toBeNull();
  });

  it('keep the entry of a move to canary made in the same millisecond as a refused one', async () => {
    const next = await store.createDeploy('a-same-ms', 2, 'a-same-ms', undefined, true, {
      trafficPercent: 10,
    });
    await store.updateDeploy('a-same-ms', next.id, 'building');
    const member = `a-same-ms/${next.id}`;
    // two deployers' moves on stores of their own, on one clock's millisecond, each held after it indexed
    const at = Date.now();
    const held = (name: string) => {
      const connection = redis.duplicate();
      const mover = new SessionsStore(connection, { limits: DEFAULT_LIMITS, now: () => at });
      const scripts = connection as unknown as { ssUpdateDeploy: (...args: unknown[]) => Promise<unknown> };
      const update = scripts.ssUpdateDeploy.bind(connection);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let indexed = false;
      scripts.ssUpdateDeploy = async (...args) => {
        indexed = true;
        await gate;
        return update(...args);
      };
      return { name, mover, release, connection, indexed: () => indexed };
    };
    const [first, second] = [held('first'), held('second')];
    try {
      // the first indexes it and is refused (nothing live yet); the second, indexed in the same
      // millisecond, moves it once a live deploy is there
      const refused = first.mover.updateDeploy('a-same-ms', next.id, 'canary');
      await vi.waitFor(() => expect(first.indexed()).toBe(true));
      const moved = second.mover.updateDeploy('a-same-ms', next.id, 'canary');
      await vi.waitFor(() => expect(second.indexed()).toBe(true));
      first.release();
      await expect(refused).rejects.toMatchObject({ code: 'CONFLICT' });
      const live = await store.createDeploy('a-same-ms', 1, 'a-same-ms');
      await store.updateDeploy('a-same-ms', live.id, 'building');
      await store.updateDeploy('a-same-ms', live.id, 'live');
      second.release();
      expect(await moved).toMatchObject({ status: 'canary' });
      // the sweep finds it: judged when due
      expect(await score(member)).not.toBeNull();
    } finally {
      for (const h of [first, second]) h.connection.disconnect();
    }
  });

  it('are rolled back once when two judges decide it at once: the second is refused, and announces nothing', async () => {
    const { canary, member } = await withCanary('a-two-judges');
    const verdict = (at: number) =>
      ({
        rule: 'success_rate',
        reason: 'the canary answers worse',
        z: 6.3,
        canary: { deployId: canary.id, judged: 20, passed: 0, successRate: 0, timed: 0, responseP50Ms: null },
        live: { deployId: 'x', judged: 20, passed: 20, successRate: 1, timed: 0, responseP50Ms: null },
        at,
      }) as const;
    const moves = await Promise.allSettled(
      [1, 2].map((n) =>
        store.updateDeploy('a-two-judges', canary.id, 'rolled_back', undefined, undefined, verdict(n)),
      ),
    );
    expect(moves.filter((m) => m.status === 'fulfilled')).toHaveLength(1);
    expect(moves.find((m) => m.status === 'rejected')).toMatchObject({
      reason: { code: 'ILLEGAL_TRANSITION' },
    });
    // the same move without an outcome is still a no-op (an external deployer's retry)
    await expect(store.updateDeploy('a-two-judges', canary.id, 'rolled_back')).resolves.toMatchObject({
      status: 'rolled_back',
    });
    await store.announced('a-two-judges', canary.id, 'rolled_back');
    expect(await score(member)).toBeNull();
  });

  it('tell again only the ends a canary reaches, and forget what no canary ends as', async () => {
    // as a refused move left them before refusals took their entry out: a live deploy never a canary, and a
    // failed external one
    const live = await store.createDeploy('a-leftover', 1, 'a-leftover');
    await store.updateDeploy('a-leftover', live.id, 'building');
    await store.updateDeploy('a-leftover', live.id, 'live');
    const failed = await store.createDeploy('a-leftover', 2, 'a-leftover', undefined, true);
    await store.updateDeploy('a-leftover', failed.id, 'failed');
    const members = [live.id, failed.id].map((id) => `a-leftover/${id}`);
    for (const m of members) await redis.zadd(CANARIES, Date.now() - 1_000, m);
    announced.length = 0;
    await sweep.sweep(Date.now());
    expect(announced).toEqual([]);
    for (const m of members) expect(await score(m)).toBeNull();
  });

  it("keep the entry of a move to canary made while the sweep forgets the deploy's old one", async () => {
    const live = await store.createDeploy('a-late', 1, 'a-late');
    await store.updateDeploy('a-late', live.id, 'building');
    await store.updateDeploy('a-late', live.id, 'live');
    const next = await store.createDeploy('a-late', 2, 'a-late', undefined, true, { trafficPercent: 10 });
    await store.updateDeploy('a-late', next.id, 'building');
    const member = `a-late/${next.id}`;
    const now = Date.now();
    // an earlier move to canary's entry, the deploy building for long (an external deployer's)
    await redis.zadd(CANARIES, now - 1_000, member);
    await redis.hset(`ss:{a-late}:dep:${next.id}`, 'updatedAt', String(now - 120_000));
    // its deployer's PATCH to canary lands after the sweep read it building
    const read = store.getDeploy.bind(store);
    store.getDeploy = async (agentId, deployId) => {
      const deploy = await read(agentId, deployId);
      if (deployId === next.id) await store.updateDeploy(agentId, deployId, 'canary');
      return deploy;
    };
    try {
      await sweep.sweep(now);
    } finally {
      store.getDeploy = read;
    }
    expect(await store.getDeploy('a-late', next.id)).toMatchObject({ status: 'canary' });
    expect(await score(member)).not.toBeNull();
  });

  it('put off the entries that fail, so that a batch of them keeps no other canary from being judged', async () => {
    const good = await withCanary('a-behind');
    const now = Date.now();
    // a full batch of entries that fail to settle (records Redis cannot read as deploys), due first
    const bad = Array.from({ length: 200 }, (_, i) => `a-unreadable/d${i}`);
    for (const [i, m] of bad.entries()) {
      await redis.set(`ss:{a-unreadable}:dep:d${i}`, 'not a hash');
      await redis.zadd(CANARIES, now - 10_000, m);
    }
    // the first pass is theirs; the next one reaches the canary behind them
    await sweep.sweep(now);
    for (const m of bad) expect(await score(m)).toBeGreaterThan(now + INTERVAL);
    await sweep.sweep(now + 1_000);
    expect(await score(good.member)).toBe(now + 1_000 + INTERVAL);
    // and a pipeline deploy that fails to settle is looked at again later, not at each pass
    await redis.zadd('ss:{deploys}:pipeline', now - 120_000, 'a-unreadable/d0');
    await sweep.sweep(now);
    expect(Number(await redis.zscore('ss:{deploys}:pipeline', 'a-unreadable/d0'))).toBeGreaterThan(
      now - 60_000,
    );
    for (const m of bad) await redis.zrem(CANARIES, m);
    await redis.zrem('ss:{deploys}:pipeline', 'a-unreadable/d0');
  });
});
