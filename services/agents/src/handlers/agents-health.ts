import type { Handler } from '@vab/bus';
import { storage, type Redis } from '@vab/storage';

/** Answers only when this instance can reach its storage, so /readyz reflects what users would hit. */
export const agentsHealth =
  (redis: Redis): Handler<'agents.health'> =>
  async () => {
    await storage(() => redis.ping());
    return { service: 'agents', ok: true };
  };
