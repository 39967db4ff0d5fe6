import type { Handler } from '@vab/bus';
import { storage } from '@vab/storage';
import type { Deps } from '../deps.js';

export const sessionsHealth =
  ({ redis }: Deps): Handler<'sessions.health'> =>
  async () => {
    await storage(() => redis.ping());
    return { service: 'sessions', ok: true };
  };
