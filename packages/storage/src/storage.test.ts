import { countSocketWrites, startRedis, type DisposableServer } from '@vab/testkit';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from './index.js';

let server: DisposableServer;
const log = pino({ level: 'silent' });

beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server.dispose();
});

describe('createRedis', () => {
  it('sends the commands of one turn of the event loop in one write, in order, after a reconnect too', async () => {
    const redis = createRedis(server.url, log, { name: 'coalesce-test' });
    try {
      await redis.ping();
      for (const round of [1, 2]) {
        const writes = countSocketWrites((redis as unknown as { stream: object }).stream);
        const replies: Promise<unknown>[] = [];
        // each command from its own microtask, as handlers of separate requests would issue them
        for (let i = 0; i < 50; i++) {
          replies.push(redis.rpush(`coalesce:${round}`, String(i)));
          await Promise.resolve();
        }
        expect(writes()).toBe(0);
        await new Promise((r) => setImmediate(r));
        expect(writes()).toBe(1);
        expect(await Promise.all(replies)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
        expect(await redis.lrange(`coalesce:${round}`, 0, -1)).toEqual(
          Array.from({ length: 50 }, (_, i) => String(i)),
        );
        if (round === 1) {
          // a new socket after a dropped connection gets the same treatment
          const reconnected = new Promise((r) => redis.once('ready', r));
          redis.disconnect(true);
          await reconnected;
        }
      }
    } finally {
      redis.disconnect();
    }
  });
});
