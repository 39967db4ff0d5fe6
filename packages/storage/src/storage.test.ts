import { AppError } from '@vab/contracts';
import {
  countSocketWrites,
  freePort,
  lineSink,
  startLocalRedisCluster,
  startRedis,
  type DisposableServer,
} from '@vab/testkit';
import { spawnSync } from 'node:child_process';
import { Socket } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, observeRedisCommands, scriptError, storage, type RedisClient } from './index.js';

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

describe('Redis command timing', () => {
  /** A client made while `observe` is the process's observer, and what it has heard so far. */
  const observed = (target: Parameters<typeof createRedis>[0], observe = (_ok: boolean) => undefined) => {
    const heard: [string, boolean][] = [];
    observeRedisCommands((command, ok, seconds) => {
      expect(seconds).toBeGreaterThanOrEqual(0);
      // ioredis's own at connect (CLIENT SETNAME, SETINFO, the INFO ready check) are timed too; not these tests'
      if (command !== 'client' && command !== 'info') heard.push([command, ok]);
      observe(ok);
    });
    try {
      return { redis: createRedis(target, log, { name: 'timing-test' }), heard };
    } finally {
      observeRedisCommands(undefined);
    }
  };

  it('times each command once, by name and outcome: queued before connecting, failed, piped, scripted', async () => {
    const { redis, heard } = observed(server.url);
    try {
      // sent before the connection is up: queued, then sent again on connect — still one command
      expect(await redis.set('timing:s', 'v')).toBe('OK');
      expect(heard).toEqual([['set', true]]);

      heard.length = 0;
      await expect(redis.incr('timing:s')).rejects.toThrow(/not an integer/);
      expect(heard).toEqual([['incr', false]]);

      heard.length = 0;
      expect(await redis.pipeline().get('timing:s').incr('timing:s').exec()).toEqual([
        [null, 'v'],
        [expect.objectContaining({ name: 'ReplyError' })],
      ]);
      expect(await redis.multi().set('timing:m', '1').incr('timing:m').exec()).toEqual([
        [null, 'OK'],
        [null, 2],
      ]);
      expect(heard).toEqual([
        ['get', true],
        ['incr', false],
        ['multi', true],
        ['set', true],
        ['incr', true],
        ['exec', true],
      ]);

      // a script: EVAL the first time on a connection, EVALSHA after; after a SCRIPT FLUSH, the NOSCRIPT
      // refusal (an error Redis did answer) and the EVAL ioredis sends again, and the caller sees neither
      const client = redis as RedisClient & { echo1(key: string, v: string): Promise<string> };
      redis.defineCommand('echo1', { numberOfKeys: 1, lua: 'return ARGV[1]' });
      heard.length = 0;
      expect(await client.echo1('timing:e', 'a')).toBe('a');
      expect(await client.echo1('timing:e', 'b')).toBe('b');
      expect(heard).toEqual([
        ['eval', true],
        ['evalsha', true],
      ]);
      await redis.script('FLUSH');
      heard.length = 0;
      expect(await client.echo1('timing:e', 'c')).toBe('c');
      expect(heard).toEqual([
        ['evalsha', false],
        ['eval', true],
      ]);
    } finally {
      redis.disconnect();
    }
  });

  it('answers the caller even when the observer throws', async () => {
    const { redis, heard } = observed(server.url, () => {
      throw new Error('observer broke');
    });
    try {
      expect(await redis.set('timing:t', '1')).toBe('OK');
      await expect(
        redis.incr('timing:t:missing:type').then(() => redis.hget('timing:t', 'f')),
      ).rejects.toThrow(/WRONGTYPE/);
      expect(await redis.get('timing:t')).toBe('1');
      expect(heard).toEqual([
        ['set', true],
        ['incr', true],
        ['hget', false],
        ['get', true],
      ]);
    } finally {
      redis.disconnect();
    }
  });

  it('times a command redirected by a cluster once, from its first send', { timeout: 60_000 }, async () => {
    const cluster = await startLocalRedisCluster({ masters: 3, replicas: 0 });
    const cli = (port: number, ...args: string[]) => {
      const r = spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim();
    };
    const { redis, heard } = observed({
      clusterNodes: cluster.nodes.map(({ host, port }) => ({ host, port })),
    });
    try {
      // sent before the cluster's slots are known: queued, then sent again — one command
      expect(await redis.set('timing:{moved}', 'before')).toBe('OK');
      expect(heard.filter(([name]) => name !== 'cluster')).toEqual([['set', true]]);
      // move the key's slot to another master behind the client's back: its next command there is MOVED
      const from = cluster.masterOf('timing:{moved}');
      const to = cluster.nodes.find((n) => n !== from)!;
      const slot = cli(from.port, 'cluster', 'keyslot', 'timing:{moved}');
      const toId = cli(to.port, 'cluster', 'myid');
      const fromId = cli(from.port, 'cluster', 'myid');
      cli(to.port, 'cluster', 'setslot', slot, 'importing', fromId);
      cli(from.port, 'cluster', 'setslot', slot, 'migrating', toId);
      cli(from.port, 'migrate', '127.0.0.1', String(to.port), 'timing:{moved}', '0', '5000');
      for (const n of cluster.nodes) cli(n.port, 'cluster', 'setslot', slot, 'node', toId);
      heard.length = 0;
      expect(await redis.get('timing:{moved}')).toBe('before');
      expect(heard).toEqual([['get', true]]);
      // it was redirected: the client learnt the slot's new master from the MOVED reply
      const slots = (redis as unknown as { slots: string[][] }).slots;
      expect(slots[Number(slot)]?.[0]).toBe(`127.0.0.1:${to.port}`);
      await expect(redis.incr('timing:{moved}')).rejects.toThrow(/not an integer/);
      expect(heard).toEqual([
        ['get', true],
        ['incr', false],
      ]);
    } finally {
      redis.disconnect();
      await cluster.dispose();
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
