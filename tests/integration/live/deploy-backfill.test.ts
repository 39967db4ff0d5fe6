import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Subjects, type DeployRecord, type DomainEvent } from '@vab/contracts';
import { CallsStore } from '@vab/sessions';
import { voiceFlow } from '@vab/testkit';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { api, keysMatching, startStack, type Stack } from '../../helpers/stack.js';

/**
 * A store upgraded in place: deploys the previous version wrote are in none of the deploy sweep's indexes (a
 * deploy it left `building`, a canary without a window, one with a window in the previous version's index,
 * none of their calls counted for the canary judge). The sessions service's start backfills them — once,
 * whatever the number of instances or starts — and the sweep then settles each as if it had always been
 * indexed. Runs on a Redis Cluster too (the stack's Redis: REDIS_CLUSTER_NODES).
 */

let stack: Stack;
let http: ReturnType<typeof api>;
let nc: NatsConnection;

const flow = voiceFlow({ chatURL: 'http://127.0.0.1:9/v1', speechURL: 'http://127.0.0.1:9/v1' });
const CANARIES = 'ss:{deploys}:canaries';
const PIPELINE = 'ss:{deploys}:pipeline';
const LEGACY_WINDOWS = 'ss:{deploys}:windows';

beforeAll(async () => {
  stack = await startStack({
    playground: { CREDENTIALS_KEY: randomBytes(32).toString('hex') },
    deploys: { intervalMs: 250, interruptedAfterMs: 4_000, checkTimeoutMs: 2_000 },
  });
  http = api(stack.baseUrl);
  nc = await connect({ servers: stack.natsUrl });
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await stack?.close();
});

const deployOf = async (agentId: string, id: string) =>
  (await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`)).body.find((d) => d.id === id)!;

async function deployed(agentId: string, body: Record<string, unknown>, status: string) {
  const res = await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  await expect
    .poll(async () => (await deployOf(agentId, res.body.id)).status, { timeout: 30_000, interval: 100 })
    .toBe(status);
  return deployOf(agentId, res.body.id);
}

function eventsOf(agentId: string, type: string) {
  const seen: DomainEvent[] = [];
  const sub = nc.subscribe(`domain.${agentId}.${type}`, {
    callback: (_e, m) => void seen.push(m.json<DomainEvent>()),
  });
  return { seen, stop: () => sub.unsubscribe() };
}

const agent = async (name: string) => (await http.post('/api/agents', { name, flow })).body.id as string;

/** Closed and analysed calls of `deploy`, the first `passing` of them successful (the store's own code). */
async function calls(deploy: DeployRecord, count: number, passing: number) {
  const store = new CallsStore(stack.redis, 3);
  const { agentId } = deploy;
  for (let i = 0; i < count; i++) {
    const callId = randomUUID();
    await store.create({ agentId, callId, deploy, channel: 'web', caller: {} });
    await store.end({ agentId, callId, endedAt: Date.now(), endedReason: 'caller_hung_up', usage: [] });
    await store.setAnalysis({
      agentId,
      callId,
      jobId: randomUUID(),
      requestedAt: Date.now(),
      analysis: {
        summary: null,
        criteria: [],
        success: i < passing,
        data: {},
        model: { provider: 'test', model: 'test' },
        usage: [],
        at: Date.now(),
      },
    });
  }
}

describe('deploys of a store upgraded in place', () => {
  it('are indexed at the next start and settled by the sweep: interrupted, promoted, rolled back', async () => {
    const sessions = stack.services.sessions;
    // a canary with a window, which the previous version indexed in its own index
    const windowed = await agent('Windowed desk');
    await deployed(windowed, {}, 'live');
    const windowCanary = await deployed(windowed, { trafficPercent: 50, canaryWindowMs: 10_000 }, 'canary');
    // a canary without a window whose calls are worse than the live deploy's
    const worse = await agent('Worse desk');
    const worseLive = await deployed(worse, {}, 'live');
    const worseCanary = await deployed(worse, { trafficPercent: 50 }, 'canary');
    // a deploy whose pipeline will be cut short by the crash
    const cut = await agent('Cut desk');
    await stack.services.playground.stop();
    const held = nc.subscribe(Subjects.deployCheck, { callback: () => undefined });
    const building = (await http.post<DeployRecord>(`/api/agents/${cut}/deploys`, {})).body;
    await expect
      .poll(async () => (await deployOf(cut, building.id)).status, { timeout: 10_000, interval: 50 })
      .toBe('building');
    await sessions.crash();
    held.unsubscribe();
    await stack.services.playground.start();

    // the store as the previous version leaves it: no entry for these in the indexes, no canary's figures
    const r = stack.redis;
    await r.zrem(PIPELINE, `${cut}/${building.id}`);
    await r.zrem(CANARIES, `${windowed}/${windowCanary.id}`, `${worse}/${worseCanary.id}`);
    await r.zadd(LEGACY_WINDOWS, windowCanary.liveAt! + 10_000, `${windowed}/${windowCanary.id}`);
    for (const key of await keysMatching(r, `ss:{${worse}}:cj:*`)) await r.del(key);
    for (const key of await keysMatching(r, `ss:{${windowed}}:cj:*`)) await r.del(key);
    // its calls were closed by an instance of the previous version, which counted nothing
    await calls(worseCanary, 20, 4);
    await calls(worseLive, 20, 20);
    for (const key of await keysMatching(r, `ss:{${worse}}:cj:*`)) await r.del(key);
    const failed = eventsOf(cut, 'deploy.failed');
    const rolledBack = eventsOf(worse, 'deploy.rolled_back');
    const wentLive = eventsOf(windowed, 'deploy.live');

    await sessions.start();

    await expect
      .poll(async () => (await deployOf(cut, building.id)).status, { timeout: 30_000, interval: 250 })
      .toBe('failed');
    expect((await deployOf(cut, building.id)).failure?.issues).toEqual([
      { code: 'INTERRUPTED', message: 'the deploy pipeline was interrupted; deploy again' },
    ]);
    await expect
      .poll(async () => (await deployOf(worse, worseCanary.id)).status, { timeout: 30_000, interval: 250 })
      .toBe('rolled_back');
    expect((await deployOf(worse, worseCanary.id)).rollback).toMatchObject({
      rule: 'success_rate',
      canary: { judged: 20, passed: 4 },
      live: { judged: 20, passed: 20 },
    });
    await expect
      .poll(async () => (await deployOf(windowed, windowCanary.id)).status, {
        timeout: 30_000,
        interval: 250,
      })
      .toBe('live');
    expect((await deployOf(windowed, windowCanary.id)).promoted).toMatchObject({ by: 'window' });
    // each told once
    await vi.waitFor(() => expect(failed.seen).toHaveLength(1), { timeout: 10_000 });
    await vi.waitFor(() => expect(rolledBack.seen).toHaveLength(1), { timeout: 10_000 });
    await vi.waitFor(() => expect(wentLive.seen).toHaveLength(1), { timeout: 10_000 });
    expect(wentLive.seen[0]!.data).toMatchObject({ deploy: { id: windowCanary.id, status: 'live' } });
    for (const e of [failed, rolledBack, wentLive]) e.stop();
    // settled, they leave the indexes (the previous version's too)
    await expect
      .poll(async () => [await r.zcard(CANARIES), await r.zcard(LEGACY_WINDOWS)], { timeout: 10_000 })
      .toEqual([0, 0]);
    await expect.poll(() => r.zscore(PIPELINE, `${cut}/${building.id}`), { timeout: 10_000 }).toBeNull();
  }, 120_000);

  it('is idempotent: a second run adds nothing, and a run under way elsewhere is left to it', async () => {
    const backfill = stack.services.sessions.sessions!.deploySweep.backfill;
    const again = await backfill.run();
    expect(again).toMatchObject({ indexed: 0, recounted: 0 });
    expect(again!.agents).toBeGreaterThanOrEqual(3);
    // another instance holds the lock: this one leaves the backfill to it
    await stack.redis.set('ss:{deploys}:backfill-lock', 'another', 'PX', 60_000);
    try {
      expect(await backfill.run()).toBeNull();
    } finally {
      await stack.redis.del('ss:{deploys}:backfill-lock');
    }
  });
});
