import type { Handler } from '@vab/bus';
import { storage, type RedisClient } from '@vab/storage';

/** Answers only when this instance can reach its storage, so /readyz reflects what users would hit. */
export const webhooksHealth =
  (redis: RedisClient): Handler<'webhooks.health'> =>
  async () => {
    await storage(() => redis.ping());
    return { service: 'webhooks', ok: true };
  };
