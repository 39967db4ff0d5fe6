import { freePort, freePortRange, tcpProbe } from '@vab/testkit';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { built } from '../helpers/processes.js';

// `npm start` (scripts/stack.mjs) when one of its processes dies, and when it is told to stop (issue 35, 11).
const script = join(import.meta.dirname, '..', '..', 'scripts', 'stack.mjs');
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

interface LogRecord {
  service?: string;
  msg?: string;
  pid?: number;
  [k: string]: unknown;
}

async function startScript(extra: Record<string, string> = {}) {
  // the stack binds METRICS_PORT_BASE…+2, one metrics port per service: all three must be free
  const metrics = await freePortRange(3);
  const reserved = new Set([metrics, metrics + 1, metrics + 2]);
  const others: number[] = [];
  while (others.length < 3) {
    const p = await freePort();
    if (!reserved.has(p)) {
      reserved.add(p);
      others.push(p);
    }
  }
  const [nats, redis, port] = others as [number, number, number];
  const state = mkdtempSync(join(tmpdir(), 'stack-'));
  const child = spawn(process.execPath, [script], {
    env: {
      PATH: process.env.PATH ?? '',
      NATS_URL: `nats://127.0.0.1:${nats}`,
      REDIS_URL: `redis://127.0.0.1:${redis}`,
      PORT: String(port),
      METRICS_PORT_BASE: String(metrics),
      STACK_STATE_DIR: state,
      SHUTDOWN_TIMEOUT_MS: '3000',
      ...extra,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const records: LogRecord[] = [];
  let partial = '';
  const take = (d: Buffer) => {
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const l of lines) {
      try {
        records.push(JSON.parse(l) as LogRecord);
      } catch {
        records.push({ msg: l });
      }
    }
  };
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // a failed test still stops what the script started: SIGTERM (it stops its children), SIGKILL if it hangs
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(killer);
    }
    rmSync(state, { recursive: true, force: true });
  });
  const seen = (msg: string) => records.find((r) => r.msg?.startsWith(msg));
  const waitFor = (msg: string, timeout = 60_000) =>
    expect.poll(() => seen(msg), { timeout, interval: 100 }).toBeTruthy();
  // the service's process: a child of the script running services/<service>/dist/main.js
  const pidOf = (service: string) => {
    const rows = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(child.pid)], { encoding: 'utf8' });
    const row = rows.split('\n').find((r) => r.includes(`services/${service}/dist/main.js`));
    return row ? Number(row.trim().split(/\s+/)[0]) : undefined;
  };
  const serversUp = async () =>
    (await tcpProbe(nats, undefined, 'INFO')) || (await tcpProbe(redis, 'PING\r\n', 'PONG'));
  return { child, records, exited, seen, waitFor, pidOf, serversUp, base: `http://127.0.0.1:${port}` };
}

describe.skipIf(!built())('npm start (scripts/stack.mjs)', () => {
  it('starts a service that died again, says the console and whose servers it runs, and on SIGTERM stops them all', async () => {
    const s = await startScript();
    await s.waitFor('ready: the gateway answers');
    expect(s.seen('ready: the gateway answers')).toMatchObject({ console: `${s.base}/console` });
    expect(s.seen('started nats-server (ours: stopped with the stack)')).toBeTruthy();
    const first = s.pidOf('playground')!;
    process.kill(first, 'SIGKILL');
    await s.waitFor('a service exited; starting it again');
    expect(s.seen('a service exited; starting it again')).toMatchObject({
      process: 'playground',
      restart: 1,
    });
    await expect
      .poll(
        async () => {
          const res = await fetch(`${s.base}/readyz`).catch(() => undefined);
          return res?.status;
        },
        { timeout: 30_000, interval: 250 },
      )
      .toBe(200);
    expect(s.pidOf('playground')).toBeGreaterThan(0);
    expect(s.pidOf('playground')).not.toBe(first);
    const t0 = Date.now();
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(await s.serversUp()).toBe(false);
  }, 120_000);

  it('past its restarts, stops the whole stack (servers included) and exits 1 instead of hanging', async () => {
    const s = await startScript({ STACK_MAX_RESTARTS: '0' });
    await s.waitFor('ready: the gateway answers');
    process.kill(s.pidOf('sessions')!, 'SIGKILL');
    expect(await s.exited).toBe(1);
    expect(s.seen('a process exited; stopping the stack')).toMatchObject({ process: 'sessions' });
    expect(await s.serversUp()).toBe(false);
  }, 120_000);
});
