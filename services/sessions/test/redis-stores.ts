import { Redis } from '@vab/storage';
import { startLocalRedis } from '@vab/testkit';
import { afterAll, beforeAll } from 'vitest';
import { DEFAULT_LIMITS } from '../src/config.js';
import { CallsStore } from '../src/live/calls-store.js';
import { SessionsStore } from '../src/store.js';

export interface RedisStores {
  redis: Redis;
  store: SessionsStore;
  calls: CallsStore;
}

/**
 * The sessions service's stores on a redis-server of this test file's own (started before its tests, stopped
 * after them), at the service's default limits: read the fields inside tests and hooks, once they are set.
 */
export function redisStores(): RedisStores {
  const stores = {} as RedisStores;
  let server: Awaited<ReturnType<typeof startLocalRedis>> | undefined;
  beforeAll(async () => {
    server = await startLocalRedis();
    stores.redis = new Redis(server.url);
    stores.store = new SessionsStore(stores.redis, { limits: DEFAULT_LIMITS });
    stores.calls = new CallsStore(stores.redis, 3);
  });
  afterAll(async () => {
    stores.redis?.disconnect();
    await server?.dispose();
  });
  return stores;
}
