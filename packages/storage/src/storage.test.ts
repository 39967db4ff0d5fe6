import { AppError } from '@vab/contracts';
import { countSocketWrites, freePort, lineSink, startRedis, type DisposableServer } from '@vab/testkit';
import { Socket } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, scriptError, storage } from './index.js';

let server: DisposableServer;
const log = pino({ level: 'silent' });

beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server.dispose();
});

describe('createRedis', () => {
  it('still finds the ioredis internals it patches (an ioredis upgrade that moves them must fail here)', async () => {
    const lines: string[] = [];
    const redis = createRedis(server.url, pino(lineSink(lines)), { name: 'internals-test' });
    try {
      await redis.ping();
      // ioredis 5 keeps the connection's socket in the private `stream`, replaced on every reconnect
      const stream = (redis as unknown as { stream?: unknown }).stream;
      const found = {
        stream: stream instanceof Socket,
        cork: stream instanceof Socket && typeof stream.cork === 'function',
        patched:
          (stream as Record<symbol, unknown> | undefined)?.[Symbol.for('vab.redis.coalesced-writes')] ===
          true,
      };
      expect(
        found,
        'ioredis internals changed: coalesceWrites in write-patch.ts no longer applies; re-measure it (bench/ab.mjs) and adapt or drop it',
      ).toEqual({ stream: true, cork: true, patched: true });
      expect(lines.join('\n')).not.toContain('REDIS_INTERNALS_CHANGED');
    } finally {
      redis.disconnect();
    }
  });

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

describe('storage errors', () => {
  const unavailable = async (op: () => Promise<unknown>) => {
    const err = await storage(op).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
      message: 'storage is unavailable, retry shortly',
    });
    return (err as AppError).cause;
  };

  it('answers 503 for a Redis that cannot serve now, by its reply prefix, keeping the original', async () => {
    const redis = createRedis(server.url, log, { name: 'errors-test' });
    try {
      for (const prefix of ['LOADING', 'TRYAGAIN', 'CLUSTERDOWN', 'MASTERDOWN']) {
        const cause = await unavailable(() => redis.eval(`return redis.error_reply('${prefix} not now')`, 0));
        expect(cause).toMatchObject({ name: 'ReplyError', message: `${prefix} not now` });
      }
      // a refusal is not an outage: it stays what it is (the bus answers INTERNAL)
      const refused = await storage(() => redis.eval("return redis.error_reply('WRONGTYPE no')", 0)).catch(
        (e: unknown) => e,
      );
      expect(refused).not.toBeInstanceOf(AppError);
      expect(refused).toMatchObject({ name: 'ReplyError' });
      // nor is an error of our own inside the operation (stored JSON that does not parse, say)
      const ours = new SyntaxError('Unexpected token } in JSON');
      await expect(storage(() => Promise.reject(ours))).rejects.toBe(ours);
    } finally {
      redis.disconnect();
    }
  });

  it('answers 503 when the connection is gone or the server unreachable', async () => {
    const closed = createRedis(server.url, log, { name: 'errors-closed' });
    await closed.ping();
    closed.disconnect();
    expect(await unavailable(() => closed.get('k'))).toMatchObject({ message: 'Connection is closed.' });

    const nowhere = createRedis(`redis://127.0.0.1:${await freePort()}`, log, { name: 'errors-nowhere' });
    try {
      const cause = await unavailable(() => nowhere.get('k'));
      expect(cause).toMatchObject({ name: 'MaxRetriesPerRequestError' });
    } finally {
      nowhere.disconnect();
    }
  });

  it("maps a script's business refusals to their codes, and outages still to 503", async () => {
    const redis = createRedis(server.url, log, { name: 'errors-script' });
    const messages = { GONE: (detail: string) => new AppError('NOT_FOUND', `agent ${detail} not found`) };
    try {
      const gone = await redis.eval("return redis.error_reply('GONE a1')", 0).catch((e: unknown) => e);
      expect(scriptError(gone, messages)).toMatchObject({ code: 'NOT_FOUND', message: 'agent a1 not found' });
      const busy = await redis.eval("return redis.error_reply('TRYAGAIN x')", 0).catch((e: unknown) => e);
      expect(scriptError(busy, messages)).toMatchObject({ code: 'SERVICE_UNAVAILABLE', cause: busy });
    } finally {
      redis.disconnect();
    }
  });
});
