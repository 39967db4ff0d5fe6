import { createLogger } from '@vab/service-kit';
import { Redis } from '@vab/storage';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionsStore } from '../store.js';
import { CallsStore } from './calls-store.js';
import { DeployBackfill } from './deploy-backfill.js';
import { redisStores } from '../../test/redis-stores.js';

/**
 * The upgrade's backfill walks every agent ever deployed at each start: one agent it cannot backfill stops
 * none of the others (else it would fail at that agent at every start, and the agents after it would never
 * be backfilled), and a run that lost its lock stops. Real redis-server.
 */

const stores = redisStores();
let redis: Redis;
let store: SessionsStore;
let calls: CallsStore;
const log = createLogger('sessions', 'silent');
const LOCK = 'ss:{deploys}:backfill-lock';

beforeAll(async () => {
  ({ redis, store, calls } = stores);
});

async function withCanary(agentId: string) {
  const live = await store.createDeploy(agentId, 1, agentId);
  await store.updateDeploy(agentId, live.id, 'building');
  await store.updateDeploy(agentId, live.id, 'live');
  const next = await store.createDeploy(agentId, 2, agentId, undefined, false, { trafficPercent: 10 });
  await store.updateDeploy(agentId, next.id, 'building');
  return store.updateDeploy(agentId, next.id, 'canary');
}

describe('the deploy backfill', () => {
  it('backfills every other agent when one fails, whichever comes first', async () => {
    // an agent whose deploys index Redis cannot read as one
    await store.createDeploy('b-broken', 1, 'b-broken');
    await redis.del('ss:{b-broken}:dep');
    await redis.set('ss:{b-broken}:dep', 'not a sorted set');
    const canaries = await Promise.all(['b-one', 'b-two'].map(async (a) => ({ a, c: await withCanary(a) })));
    // as an instance of the previous version left them: not indexed, no figures
    for (const { a, c } of canaries) {
      await redis.zrem('ss:{deploys}:canaries', `${a}/${c.id}`);
      await redis.del(`ss:{${a}}:cj`);
      // its figures as that version named them
      await redis.hset(`ss:{${a}}:cj:${c.id}`, 'since', '1', 'canary', c.id);
      await redis.sadd(`ss:{${a}}:cj:${c.id}:c:pass`, 'a-call');
    }
    const counts = await new DeployBackfill({ store, calls, redis, log }).run();
    expect(counts).toMatchObject({ agents: 3, indexed: 2, recounted: 2 });
    for (const { a, c } of canaries) {
      expect(await redis.zscore('ss:{deploys}:canaries', `${a}/${c.id}`)).not.toBeNull();
      expect(await calls.canaryFigures(a, c.id)).not.toBeNull();
      expect(await redis.exists(`ss:{${a}}:cj:${c.id}`, `ss:{${a}}:cj:${c.id}:c:pass`)).toBe(0);
    }
  });

  it('stops once its lock is lost', async () => {
    // one agent a page, the lock taken by another instance once the first agent is done (the lock is renewed
    // before each agent)
    const agentIds = ['b-broken', 'b-one', 'b-two'];
    const paged = Object.create(store) as SessionsStore;
    paged.deployedAgentsPage = async (cursor: string) => {
      const at = Number(cursor);
      if (at === 1) await redis.set(LOCK, 'another instance');
      return { cursor: at + 1 < agentIds.length ? String(at + 1) : '0', agentIds: [agentIds[at]!] };
    };
    const counts = await new DeployBackfill({ store: paged, calls, redis, log }).run();
    expect(counts?.agents).toBe(1);
    expect(await redis.get(LOCK)).toBe('another instance');
  });
});
