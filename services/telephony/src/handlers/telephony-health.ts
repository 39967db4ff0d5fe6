import type { Handler } from '@vab/bus';
import { storage, type RedisClient } from '@vab/storage';

/** Answers only when this instance can reach its storage (the numbers). */
export const telephonyHealth =
  (redis: RedisClient): Handler<'telephony.health'> =>
  async () => {
    await storage(() => redis.ping());
    return { service: 'telephony', ok: true };
  };
