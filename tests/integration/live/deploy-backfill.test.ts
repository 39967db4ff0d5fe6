import { Subjects, type DeployRecord } from '@vab/contracts';
import { describe, expect, it, vi } from 'vitest';
import { deployHarness } from '../../helpers/deploys.js';
import { keysMatching } from '../../helpers/stack.js';

/**
 * A store upgraded in place: deploys the previous version wrote are in none of the deploy sweep's indexes (a
 * deploy it left `building`, a canary without a window, one with a window in the previous version's index,
 * none of their calls counted for the canary judge). The sessions service's start backfills them — once,
 * whatever the number of instances or starts — and the sweep then settles each as if it had always been
 * indexed. Runs on a Redis Cluster too (the stack's Redis: REDIS_CLUSTER_NODES).
 */

const d = deployHarness();

const CANARIES = 'ss:{deploys}:canaries';
const PIPELINE = 'ss:{deploys}:pipeline';
const LEGACY_WINDOWS = 'ss:{deploys}:windows';

describe('deploys of a store upgraded in place', () => {
  it('are indexed at the next start and settled by the sweep: interrupted, promoted, rolled back', async () => {
    const sessions = d.stack.services.sessions;
    // a canary with a window, which the previous version indexed in its own index
    const windowed = await d.agent('Windowed desk');
    await d.deployed(windowed, {}, 'live');
    const windowCanary = await d.deployed(windowed, { trafficPercent: 50, canaryWindowMs: 10_000 }, 'canary');
    // a canary without a window whose calls are worse than the live deploy's
    const worse = await d.agent('Worse desk');
    const worseLive = await d.deployed(worse, {}, 'live');
    const worseCanary = await d.deployed(worse, { trafficPercent: 50 }, 'canary');
    // a deploy whose pipeline will be cut short by the crash
    const cut = await d.agent('Cut desk');
    await d.stack.services.playground.stop();
    const held = d.nc.subscribe(Subjects.deployCheck, { callback: () => undefined });
    const building = (await d.http.post<DeployRecord>(`/api/agents/${cut}/deploys`, {})).body;
    await d.settled(cut, building.id, 'building', 10_000);
    await sessions.crash();
    held.unsubscribe();
    await d.stack.services.playground.start();

    // the store as the previous version leaves it: no entry for these in the indexes, no canary's figures
    const r = d.stack.redis;
    await r.zrem(PIPELINE, `${cut}/${building.id}`);
    await r.zrem(CANARIES, `${windowed}/${windowCanary.id}`, `${worse}/${worseCanary.id}`);
    await r.zadd(LEGACY_WINDOWS, windowCanary.liveAt! + 10_000, `${windowed}/${windowCanary.id}`);
    for (const key of await keysMatching(r, `ss:{${worse}}:cj*`)) await r.del(key);
    for (const key of await keysMatching(r, `ss:{${windowed}}:cj*`)) await r.del(key);
    // its calls were closed by an instance of the previous version, which counted nothing
    await d.closedCalls(worseCanary, 20, 4);
    await d.closedCalls(worseLive, 20, 20);
    for (const key of await keysMatching(r, `ss:{${worse}}:cj*`)) await r.del(key);
    const failed = d.eventsOf(cut, 'deploy.failed');
    const rolledBack = d.eventsOf(worse, 'deploy.rolled_back');
    const wentLive = d.eventsOf(windowed, 'deploy.live');

    await sessions.start();

    expect((await d.settled(cut, building.id, 'failed')).failure?.issues).toEqual([
      { code: 'INTERRUPTED', message: 'the deploy pipeline was interrupted; deploy again' },
    ]);
    expect((await d.settled(worse, worseCanary.id, 'rolled_back')).rollback).toMatchObject({
      rule: 'success_rate',
      canary: { judged: 20, passed: 4 },
      live: { judged: 20, passed: 20 },
    });
    expect((await d.settled(windowed, windowCanary.id, 'live')).promoted).toMatchObject({ by: 'window' });
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
    const backfill = d.stack.services.sessions.sessions!.deploySweep.backfill;
    const again = await backfill.run();
    expect(again).toMatchObject({ indexed: 0, recounted: 0 });
    expect(again!.agents).toBeGreaterThanOrEqual(3);
    // another instance holds the lock: this one leaves the backfill to it
    await d.stack.redis.set('ss:{deploys}:backfill-lock', 'another', 'PX', 60_000);
    try {
      expect(await backfill.run()).toBeNull();
    } finally {
      await d.stack.redis.del('ss:{deploys}:backfill-lock');
    }
  });
});
