import { startLocalNats, startLocalRedis } from '@vab/testkit';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { requireBuilt, spawnService as runService } from '../../helpers/processes.js';

describe('service processes', () => {
  beforeAll(requireBuilt);
  it('serve, then on SIGTERM stop taking work, drain, close Redis and exit 0 within the bound', async () => {
    const nats = await startLocalNats();
    const redis = await startLocalRedis();
    try {
      for (const svc of ['agents', 'sessions', 'playground']) {
        const p = runService(svc, { NATS_URL: nats.url, REDIS_URL: redis.url, SHUTDOWN_TIMEOUT_MS: '3000' });
        await p.waitFor('"msg":"serving"');
        const t0 = Date.now();
        p.child.kill('SIGTERM');
        expect(await p.exited).toBe(0);
        expect(Date.now() - t0).toBeLessThan(3000);
        expect(p.output()).toContain('"msg":"shutdown complete"');
      }
    } finally {
      await nats.dispose();
      await redis.dispose();
    }
    // three processes started one after another, each as slow to start as the machine is busy
  }, 120_000);

  it('a SIGTERM during startup waits for it, then shuts down cleanly', async () => {
    const nats = await startLocalNats();
    const redis = await startLocalRedis();
    try {
      const p = runService('agents', { NATS_URL: nats.url, REDIS_URL: redis.url });
      await p.waitFor('"msg":"nats connected"');
      p.child.kill('SIGTERM');
      expect(await p.exited).toBe(0);
      expect(p.output()).toContain('"msg":"shutdown complete"');
    } finally {
      await nats.dispose();
      await redis.dispose();
    }
  });

  it('a failure during start-up is logged once, fatal, with its stack, and the process exits 1', async () => {
    const nats = await startLocalNats();
    const redis = await startLocalRedis();
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    try {
      // the ops server cannot listen: its port is taken
      const port = String((taken.address() as AddressInfo).port);
      const p = runService('agents', { NATS_URL: nats.url, REDIS_URL: redis.url, METRICS_PORT: port });
      expect(await p.exited).toBe(1);
      const fatal = p
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"failed to start"'))
        .map(
          (l) => JSON.parse(l) as { level: number; err: { type: string; message: string; stack: string } },
        );
      expect(fatal).toHaveLength(1);
      expect(fatal[0]).toMatchObject({ level: 60, err: { message: expect.stringContaining('EADDRINUSE') } });
      expect(fatal[0]!.err.stack).toMatch(/\n\s+at /);
    } finally {
      taken.close();
      await nats.dispose();
      await redis.dispose();
    }
  });

  it('fail fast at start, naming the bad variable', async () => {
    const p = runService('gateway', { PORT: 'not-a-port' });
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toContain('PORT');
    const q = runService('sessions', { MAX_MESSAGES_PER_SESSION: '0' });
    expect(await q.exited).not.toBe(0);
    expect(q.output()).toContain('MAX_MESSAGES_PER_SESSION');
  });

  it('say what is wrong in one line, without a stack, and exit 1', async () => {
    for (const [svc, env, line] of [
      [
        'gateway',
        { UPSTREAM_URL: 'ftp://old.example' },
        'gateway: invalid configuration: UPSTREAM_URL must be an http(s) URL',
      ],
      // the misspelling that used to leave the API open with a warning
      [
        'gateway',
        { API_TOKEN: 'secret' },
        'gateway: invalid configuration: API_TOKENS is not set, but API_TOKEN is',
      ],
      ['agents', { LOG_LEVEL: 'loud' }, 'agents: invalid configuration: LOG_LEVEL:'],
    ] as const) {
      const p = runService(svc, env);
      expect(await p.exited).toBe(1);
      const out = p.output().trim();
      expect(out.split('\n')).toHaveLength(1);
      expect(out.startsWith(line), out).toBe(true);
      expect(out).not.toMatch(/\n\s+at |\.js:\d+/);
    }
    // three processes, one after another: each loads its modules before it reads its settings
  }, 120_000);
});
