import { startRedis, type DisposableServer } from '@vab/testkit';
import type { Socket } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type Redis } from './index.js';

let server: DisposableServer;
const log = pino({ level: 'silent' });

beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server.dispose();
});

/** Counts the writes that reach the socket (each is one syscall). */
function countWrites(redis: Redis): () => number {
  const socket = (redis as unknown as { stream: Record<string, unknown> & Socket }).stream;
  let writes = 0;
  for (const name of ['_write', '_writev']) {
    const original = socket[name] as (...a: unknown[]) => unknown;
    socket[name] = (...a: unknown[]) => {
      writes++;
      return original.apply(socket, a);
    };
  }
  return () => writes;
}

describe('createRedis', () => {
  it('sends the commands of one turn of the event loop in one write, in order, after a reconnect too', async () => {
    const redis = createRedis(server.url, log, { name: 'coalesce-test' });
    try {
      await redis.ping();
      for (const round of [1, 2]) {
        const writes = countWrites(redis);
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
