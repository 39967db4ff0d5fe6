import {
  freePort,
  freePortRange,
  startOpenAiStub,
  startSpeechStub,
  tcpProbe,
  VoiceClient,
  voiceFlow,
} from '@vab/testkit';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { requireBuilt } from '../../helpers/processes.js';

// `npm start` (scripts/stack.mjs): when one of its processes dies, when it is told to stop, when a port it
// needs is taken, and when it is killed.
const script = join(import.meta.dirname, '..', '..', '..', 'scripts', 'stack.mjs');
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

/** A program of someone else's holding a port of 127.0.0.1 (a dev server, another stack's gateway). */
async function holdPort(port: number): Promise<Server> {
  const server = createServer((socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}'));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return server;
}

/** Alive and not a zombie waiting to be reaped. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function startScript(extra: Record<string, string> = {}) {
  // the stack binds METRICS_PORT_BASE…+4, one metrics port per service (scripts/stack.mjs): all five free
  const metrics = await freePortRange(5);
  const reserved = new Set([0, 1, 2, 3, 4].map((i) => metrics + i));
  const others: number[] = [];
  while (others.length < 4) {
    const p = await freePort();
    if (!reserved.has(p)) {
      reserved.add(p);
      others.push(p);
    }
  }
  const [nats, redis, port, telephony] = others as [number, number, number, number];
  const state = mkdtempSync(join(tmpdir(), 'stack-'));
  const child = spawn(process.execPath, [script], {
    env: {
      PATH: process.env.PATH ?? '',
      NATS_URL: `nats://127.0.0.1:${nats}`,
      REDIS_URL: `redis://127.0.0.1:${redis}`,
      PORT: String(port),
      METRICS_PORT_BASE: String(metrics),
      TELEPHONY_PORT: String(telephony),
      STACK_STATE_DIR: state,
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
  // a whole stack's start (6 services importing their module graphs, NATS, Redis) beside two other test files
  // took over 60 s once on the loaded 2-core CI machine
  // A script that exits before saying `msg` fails the wait at once, with what it said (a start that failed
  // once in CI waited its whole bound and told nothing).
  const waitFor = async (msg: string, timeout = 120_000) => {
    const deadline = Date.now() + timeout;
    while (!seen(msg)) {
      const ended = child.exitCode !== null || child.signalCode !== null;
      if (ended || Date.now() > deadline) {
        const said = records.map((r) => JSON.stringify(r)).join('\n');
        throw new Error(
          `no "${msg}": the script ${ended ? `exited (${child.exitCode ?? child.signalCode})` : `still runs after ${timeout} ms`}; it said:\n${said}`,
        );
      }
      await sleep(100);
    }
  };
  // the script's processes: services, servers and its guard
  const processes = () =>
    execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(child.pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((r) => r.trim())
      .map((r) => ({ pid: Number(r.trim().split(/\s+/)[0]), args: r.trim() }));
  // the service's process: a child of the script running services/<service>/dist/main.js
  const pidOf = (service: string) =>
    processes().find((p) => p.args.includes(`services/${service}/dist/main.js`))?.pid;
  const serversUp = async () =>
    (await tcpProbe(nats, undefined, 'INFO')) || (await tcpProbe(redis, 'PING\r\n', 'PONG'));
  return {
    child,
    records,
    exited,
    seen,
    waitFor,
    pidOf,
    processes,
    serversUp,
    port,
    base: `http://127.0.0.1:${port}`,
  };
}

describe('npm start (scripts/stack.mjs)', () => {
  beforeAll(requireBuilt);
  it('starts a service that died again, says the console and whose servers it runs, and on SIGTERM stops them all', async () => {
    const s = await startScript();
    await s.waitFor('ready: the gateway answers');
    expect(s.seen('ready: the gateway answers')).toMatchObject({ console: `${s.base}/console` });
    // its own polling of /readyz does not fill the log before the line a newcomer looks for (it waited for
    // its services to say they are up, then asked once or twice)
    const before = s.records.slice(0, s.records.indexOf(s.seen('ready: the gateway answers')!));
    expect(before.filter((r) => r.url === '/readyz').length).toBeLessThanOrEqual(2);
    // the gateway it found is its own: /readyz names this run's stack
    const ready = await fetch(`${s.base}/readyz`);
    expect(ready.headers.get('x-stack-id')).toMatch(/^[0-9a-f-]{36}$/);
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
  }, 240_000);

  it('past its restarts, stops the whole stack (servers included) and exits 1 instead of hanging', async () => {
    const s = await startScript({ STACK_MAX_RESTARTS: '0' });
    await s.waitFor('ready: the gateway answers');
    process.kill(s.pidOf('sessions')!, 'SIGKILL');
    expect(await s.exited).toBe(1);
    expect(s.seen('a process exited; stopping the stack')).toMatchObject({ process: 'sessions' });
    expect(await s.serversUp()).toBe(false);
  }, 240_000);

  it('with PORT taken by another program: says so naming PORT and a free port, starts nothing, never says ready', async () => {
    const port = await freePort();
    await holdPort(port);
    const s = await startScript({ PORT: String(port) });
    expect(await s.exited).toBe(1);
    const taken = s.seen('PORT is taken by another program');
    expect(taken).toMatchObject({ PORT: String(port), host: '127.0.0.1' });
    expect(taken?.free).toEqual(expect.any(Number));
    expect(taken?.free).not.toBe(port);
    expect(s.seen('ready')).toBeUndefined();
    expect(s.seen('started nats-server')).toBeUndefined();
    expect(await s.serversUp()).toBe(false);
  }, 180_000);

  it('with a metrics port of METRICS_PORT_BASE taken: says so naming METRICS_PORT_BASE, starts nothing', async () => {
    const base = await freePortRange(5);
    await holdPort(base + 1);
    const s = await startScript({ METRICS_PORT_BASE: String(base) });
    expect(await s.exited).toBe(1);
    expect(s.seen('a metrics port of METRICS_PORT_BASE is taken')).toMatchObject({
      METRICS_PORT_BASE: base,
      taken: [base + 1],
    });
    expect(s.seen('ready')).toBeUndefined();
    expect(await s.serversUp()).toBe(false);
  }, 180_000);

  it('killed (SIGKILL), leaves no process of the stack behind: all gone within 2 s, the ports free', async () => {
    const s = await startScript();
    await s.waitFor('ready: the gateway answers');
    const started = s.processes();
    // the four services, nats-server and redis-server (and the guard)
    expect(started.length).toBeGreaterThanOrEqual(6);
    s.child.kill('SIGKILL');
    await s.exited;
    // the bound README.md states for a killed supervisor
    await expect.poll(() => started.filter((p) => alive(p.pid)), { timeout: 2000, interval: 50 }).toEqual([]);
    expect(await s.serversUp()).toBe(false);
    // a next `npm start` finds its port free
    const again = await startScript({ PORT: String(s.port) });
    await again.waitFor('ready: the gateway answers');
  }, 240_000);

  it('stops within 2 s on SIGTERM with open sessions (one waiting on its model), ending them', async () => {
    // a model that answers the turn in flight only after the stop's bound: the stop must not wait for it
    const chat = await startOpenAiStub((req) =>
      JSON.stringify(req.messages).includes('take your time')
        ? { content: 'late', delayMs: 30_000 }
        : { content: 'Hello.' },
    );
    const speech = await startSpeechStub({ transcribe: () => '' });
    cleanups.push(async () => {
      await chat.close();
      await speech.close();
    });
    const s = await startScript();
    await s.waitFor('ready: the gateway answers');
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${s.base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return (await res.json()) as Record<string, string>;
    };
    const flow = voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
    const agentId = (await post('/api/agents', { name: 'Stop me', flow })).id!;
    const apiKeys = { openai: 'sk-stack-test-key-0123456789' };
    // a voice session with its socket open (the console's Talk), and a text session in the middle of a turn.
    // Unrecorded: what the bound is about is what a stop waits for; storing a recording is FFmpeg's flush and
    // the store's round trips, as long as the machine takes (half a second at load 3-6, 2 s at load 22)
    const voice = await post(`/api/agents/${agentId}/voice-sessions`, { apiKeys, record: false });
    const client = new VoiceClient({ url: s.base.replace(/^http/, 'ws') + voice.audioPath });
    await client.ready;
    const text = await post(`/api/agents/${agentId}/text-sessions`, { apiKeys });
    const turn = post(`/api/agents/${agentId}/text-sessions/${text.sessionId}/turns`, {
      text: 'take your time',
    }).catch(() => undefined);
    // the turn is at its model
    await expect
      .poll(() => chat.requests.some((r) => JSON.stringify(r.messages).includes('take your time')), {
        timeout: 10_000,
      })
      .toBe(true);
    const t0 = Date.now();
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(2000);
    await turn;
    // both ended as sessions end (their records closed), not cut off by the exit
    const stopped = s.records.filter((r) => r.msg === 'session stopped');
    expect(stopped.map((r) => [r.sessionId, r.reason]).sort()).toEqual(
      [
        [voice.sessionId, 'shutdown'],
        [text.sessionId, 'shutdown'],
      ].sort(),
    );
    const closed = s.records.filter((r) => r.msg === 'test session closed').map((r) => r.sessionId);
    expect(closed.sort()).toEqual([voice.sessionId, text.sessionId].sort());
    expect(s.records.filter((r) => r.code === 'STOPPED_WITH_REQUESTS_IN_FLIGHT')).toEqual([]);
    expect((await client.closed).code).toBe(1000);
  }, 240_000);
});
