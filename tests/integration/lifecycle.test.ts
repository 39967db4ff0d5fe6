import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startLocalNats, startLocalRedis } from '@vab/testkit';
import { describe, expect, it } from 'vitest';

// These run the built entry points (`npm test` builds first), as an operator would.
const root = join(import.meta.dirname, '..', '..');
const mainOf = (svc: string) => join(root, 'services', svc, 'dist', 'main.js');

function runService(svc: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [mainOf(svc)], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const waitFor = async (text: string, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!out.includes(text)) {
      if (Date.now() > deadline) throw new Error(`no "${text}" in output:\n${out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { child, exited, waitFor, output: () => out };
}

describe.skipIf(!existsSync(mainOf('agents')))('service processes', () => {
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
  });

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

  it('fail fast at start, naming the bad variable', async () => {
    const p = runService('gateway', { PORT: 'not-a-port' });
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toContain('PORT');
    const q = runService('sessions', { MAX_MESSAGES_PER_SESSION: '0' });
    expect(await q.exited).not.toBe(0);
    expect(q.output()).toContain('MAX_MESSAGES_PER_SESSION');
  });
});
