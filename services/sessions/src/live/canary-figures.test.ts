import { AppError, type AgentLookup, type CallAnalysis, type DeployRecord } from '@vab/contracts';
import { createLogger } from '@vab/service-kit';
import { Redis } from '@vab/storage';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AgentsDirectory } from '../agents-directory.js';
import { keys } from '../redis-keys.js';
import { SessionsStore } from '../store.js';
import { CallsStore } from './calls-store.js';
import { CanaryJudge, canaryVerdict, listedSide } from './canary.js';
import type { LiveDeploys } from './live-deploys.js';
import type { DeployPipeline } from './pipeline.js';
import { redisStores } from '../../test/redis-stores.js';

/**
 * The canary judge's figures (decision 0035) are counted as calls end, are analysed and are erased
 * (calls-store.ts), not listed at each check: with the same calls, the counted figures are the listed ones,
 * so the judge decides as it did. Real redis-server.
 */

const stores = redisStores();
let redis: Redis;
let store: SessionsStore;
let calls: CallsStore;

beforeAll(async () => {
  ({ redis, store, calls } = stores);
});

const log = createLogger('sessions', 'silent');
const rule = { minCalls: 20, maxSlowdownMs: 300 };
const agents = {
  requireActive: async (id: string): Promise<AgentLookup> => ({ id, exists: true, archived: false }),
  lookup: async (id: string): Promise<AgentLookup> => ({ id, exists: true, archived: false }),
} as unknown as AgentsDirectory;

/** The judge with a pipeline that remembers what it announced (the store forgets it from the indexes). */
function judge() {
  const announced: { type: string; deploy: DeployRecord }[] = [];
  const pipeline = {
    announce: async (deploy: DeployRecord, type: string) => {
      announced.push({ type, deploy });
      await store.announced(deploy.agentId, deploy.id, deploy.status);
      return true;
    },
    publishLive: async (deploy: DeployRecord) => {
      announced.push({ type: 'deploy.live', deploy });
      await store.announced(deploy.agentId, deploy.id, deploy.status);
      return true;
    },
  } as unknown as DeployPipeline;
  const liveDeploys = { put: async () => undefined, remove: async () => undefined } as unknown as LiveDeploys;
  return { judge: new CanaryJudge({ store, calls, pipeline, agents, liveDeploys, log, rule }), announced };
}

/** mulberry32: the same "random" calls at every run. */
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function liveAndCanary(agentId: string) {
  const live = await store.createDeploy(agentId, 1, agentId);
  await store.updateDeploy(agentId, live.id, 'building');
  await store.updateDeploy(agentId, live.id, 'live');
  const canary = await store.createDeploy(agentId, 2, agentId, undefined, false, { trafficPercent: 50 });
  await store.updateDeploy(agentId, canary.id, 'building');
  return { live: await store.getDeploy(agentId, live.id), canaryId: canary.id };
}

const analysisOf = (success: boolean | null): CallAnalysis => ({
  summary: null,
  criteria: [],
  success,
  data: {},
  model: { provider: 'test', model: 'test' },
  usage: [],
  at: Date.now(),
});

/**
 * A call on `deploy` as the host makes one: admitted, its turns, ended (or still going on), analysed (or
 * not, skipped, or judged unknown); `success` forced when given.
 */
async function call(deploy: DeployRecord, rnd: () => number, shape: { success?: boolean | null } = {}) {
  const callId = randomUUID();
  const c = { agentId: deploy.agentId, callId, deploy, channel: 'web' as const, caller: {} };
  await calls.create(c);
  const turns = Math.floor(rnd() * 3);
  for (let t = 0; t < turns; t++) {
    const responseMs = Math.round((400 + rnd() * 900) * 100) / 100;
    await calls.append(
      deploy.agentId,
      callId,
      {
        role: 'assistant',
        content: 'hi',
        stepId: 's',
        timestamp: Date.now(),
        metrics: { responseMs, e2eLatencyMs: responseMs },
      },
      100,
    );
  }
  if (shape.success === undefined && rnd() < 0.1) return callId; // still going on
  await calls.end({
    agentId: deploy.agentId,
    callId,
    endedAt: Date.now(),
    endedReason: 'caller_hung_up',
    usage: [],
  });
  const r = rnd();
  const analysis: CallAnalysis | null =
    shape.success !== undefined
      ? analysisOf(shape.success)
      : r < 0.1
        ? null
        : r < 0.15
          ? { skipped: 'too_short', at: Date.now() }
          : analysisOf(r < 0.25 ? null : r < 0.7 ? true : false);
  if (analysis) await analyse(deploy.agentId, callId, analysis);
  return callId;
}

let requested = 1_000;
const analyse = (agentId: string, callId: string, analysis: CallAnalysis) =>
  calls.setAnalysis({ agentId, callId, jobId: randomUUID(), requestedAt: requested++, analysis });

/** The judge's two sides, counted and listed, and the verdicts each gives. */
async function bothWays(j: CanaryJudge, agentId: string) {
  const canary = (await store.canaryDeploy(agentId))!;
  const live = (await store.liveDeploy(agentId))!;
  const since = canary.liveAt!;
  const counted = await j.sides(canary, live, since);
  const listed = await Promise.all([listedSide(calls, canary, since), listedSide(calls, live, since)]);
  return {
    counted,
    listed,
    verdicts: [canaryVerdict(...counted, rule), canaryVerdict(...listed, rule)],
  };
}

describe("the canary judge's counted figures", () => {
  it('are the figures its listing of the calls gives, through ends, analyses, new analyses and erasures', async () => {
    const agentId = 'a-counted';
    const rnd = prng(47);
    const { live, canaryId } = await liveAndCanary(agentId);
    // calls of the live deploy before the canary went canary count on neither side
    for (let i = 0; i < 5; i++) await call(live, rnd, { success: false });
    await new Promise((r) => setTimeout(r, 5));
    const canary = await store.updateDeploy(agentId, canaryId, 'canary');
    const { judge: j } = judge();

    const ids: { agentId: string; callId: string }[] = [];
    for (let i = 0; i < 160; i++) {
      ids.push({ agentId, callId: await call(rnd() < 0.5 ? canary : live, rnd) });
    }
    // counted, not listed
    expect(await calls.canaryFigures(agentId, canaryId)).not.toBeNull();
    let both = await bothWays(j, agentId);
    expect(both.counted).toEqual(both.listed);
    expect(both.counted[0].judged + both.counted[1].judged).toBeGreaterThan(60);
    expect(both.counted[0].timed + both.counted[1].timed).toBeGreaterThan(60);
    expect(both.verdicts[0]).toEqual(both.verdicts[1]);

    // analysed again (criteria changed): the new verdicts count; an older job never replaces a newer one's
    for (const { callId } of ids.filter((_, i) => i % 4 === 0)) {
      await analyse(agentId, callId, analysisOf(rnd() < 0.5));
    }
    const older = ids[8]!.callId;
    await calls.setAnalysis({
      agentId,
      callId: older,
      jobId: randomUUID(),
      requestedAt: 1,
      analysis: analysisOf(true),
    });
    // erased (by the builder, or past retention): gone from the figures as from the list
    let erased = 0;
    for (const { callId } of ids.filter((_, i) => i % 5 === 1)) {
      await calls.erase(agentId, callId).then(
        () => erased++,
        (err: unknown) => expect((err as AppError).code).toBe('CONFLICT'), // still going on
      );
    }
    expect(erased).toBeGreaterThan(20);
    // an end told twice stands as the first
    const ended = ids.find((_, i) => i % 5 === 2)!.callId;
    await calls.end({ agentId, callId: ended, endedAt: Date.now(), endedReason: 'agent_ended', usage: [] });
    both = await bothWays(j, agentId);
    expect(both.counted).toEqual(both.listed);
    expect(both.verdicts[0]).toEqual(both.verdicts[1]);
  });

  it('roll a worse canary back with the figures the listing gives, and go with the canary', async () => {
    const agentId = 'a-worse';
    const rnd = prng(7);
    const { live, canaryId } = await liveAndCanary(agentId);
    const canary = await store.updateDeploy(agentId, canaryId, 'canary');
    const { judge: j, announced } = judge();
    for (let i = 0; i < 24; i++) {
      await call(canary, rnd, { success: i < 8 });
      await call(live, rnd, { success: i < 23 });
    }
    const before = await bothWays(j, agentId);
    expect(before.counted).toEqual(before.listed);
    expect(before.verdicts[0]).toMatchObject({ rule: 'success_rate' });

    const rolled = await j.judge(agentId);
    expect(rolled).toMatchObject({ status: 'rolled_back', rollback: { rule: 'success_rate' } });
    expect(rolled!.rollback!.canary).toEqual(before.listed[0]);
    expect(rolled!.rollback!.live).toEqual(before.listed[1]);
    expect(announced.map((a) => a.type)).toEqual(['deploy.rolled_back']);
    // the figures end with the canary; a late call's change counts nowhere
    expect(await redis.keys(`ss:{${agentId}}:cj*`)).toEqual([]);
    await call(canary, rnd, { success: true });
    expect(await redis.keys(`ss:{${agentId}}:cj*`)).toEqual([]);
  });

  it('of a canary made before calls were counted: seeded at its first check, then the same figures', async () => {
    const agentId = 'a-seeded';
    const rnd = prng(3);
    const { live, canaryId } = await liveAndCanary(agentId);
    const canary = await store.updateDeploy(agentId, canaryId, 'canary');
    for (let i = 0; i < 30; i++) await call(rnd() < 0.5 ? canary : live, rnd);
    // the store as the previous version left it: no figures
    await redis.del(...(await redis.keys(`ss:{${agentId}}:cj*`)));
    const { judge: j } = judge();
    expect(await calls.canaryFigures(agentId, canaryId)).toBeNull();
    const unseeded = await bothWays(j, agentId);
    expect(unseeded.counted).toEqual(unseeded.listed);
    // the check seeded them: the next ones read them, not the calls
    expect(await calls.canaryFigures(agentId, canaryId)).not.toBeNull();

    // as the backfill seeds them; pages of 2 by start: calls that started in the same millisecond straddle pages
    await redis.del(...(await redis.keys(`ss:{${agentId}}:cj*`)));
    expect(
      await calls.seedCanaryFigures(agentId, { id: canaryId, since: canary.liveAt!, liveId: live.id }, 2),
    ).toBe(true);
    expect(await calls.canaryFigures(agentId, canaryId)).not.toBeNull();
    const seeded = await bothWays(j, agentId);
    expect(seeded.counted).toEqual(seeded.listed);
    expect(seeded.counted).toEqual(unseeded.listed);
    // seeding again changes nothing
    await calls.seedCanaryFigures(agentId, { id: canaryId, since: canary.liveAt!, liveId: live.id }, 7);
    expect((await bothWays(j, agentId)).counted).toEqual(unseeded.listed);
    // and calls after it are counted as they change
    for (let i = 0; i < 10; i++) await call(rnd() < 0.5 ? canary : live, rnd);
    const after = await bothWays(j, agentId);
    expect(after.counted).toEqual(after.listed);
  });

  it("are the agent's seven keys, its running canary's only: others' left behind are neither counted into nor read", async () => {
    const agentId = 'a-fixed';
    const rnd = prng(11);
    const { live, canaryId } = await liveAndCanary(agentId);
    const seven = keys.canaryCountKeys(agentId);
    // what an earlier canary left behind goes with the new canary's start
    await redis.sadd(seven[1]!, 'a-call-of-an-earlier-canary');
    const canary = await store.updateDeploy(agentId, canaryId, 'canary');
    expect(await redis.sismember(seven[1]!, 'a-call-of-an-earlier-canary')).toBe(0);
    for (let i = 0; i < 20; i++) await call(rnd() < 0.5 ? canary : live, rnd, { success: rnd() < 0.5 });
    expect((await redis.keys(`ss:{${agentId}}:cj*`)).every((k) => seven.includes(k))).toBe(true);

    // figures that are another canary's (as one left them): a call's change leaves them, the judge reads none
    await redis.hset(seven[0]!, 'canary', 'an-earlier-canary');
    const kept = await Promise.all(seven.slice(1).map((k) => redis.dump(k)));
    await call(canary, rnd, { success: true });
    expect(await Promise.all(seven.slice(1).map((k) => redis.dump(k)))).toEqual(kept);
    expect(await calls.canaryFigures(agentId, canaryId)).toBeNull();
    // its check counts its own calls again (seeding), as the listing gives them
    const { judge: j } = judge();
    const both = await bothWays(j, agentId);
    expect(both.counted).toEqual(both.listed);
    expect(await calls.canaryFigures(agentId, canaryId)).not.toBeNull();
  });
});
