import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clinicScript, freePort, speak, VoiceClient } from '@vab/testkit';
import { beforeAll, describe, expect, it } from 'vitest';
import { processSuite, requireBuilt, type ServiceProcess } from '../../helpers/processes.js';

/**
 * Issue 50: a playground process on worker threads (PLAYGROUND_THREADS, decision 0037), each thread an instance
 * with its own event loop; the process, spawned as an operator runs it, serves real voice sessions on each,
 * exports one /metrics, stops on SIGTERM within its bound, and ends (exit 1) when a thread dies.
 */

const CRASH = join(import.meta.dirname, '..', '..', 'helpers', 'thread-crash.cjs');
const KEY = 'sk-threads-test-key-0123456789';
const SAID = 'I would like to book an appointment please';
const { cleanup, backends, start } = processSuite({ timeoutMs: 120_000 });

let base: string;
let agentId: string;
let dir: string;

/** A playground process of two threads with room for one session each: the second start goes to the other. */
const startThreads = (extra: Record<string, string> = {}) =>
  start(
    'playground',
    {
      PLAYGROUND_THREADS: '2',
      MAX_SESSIONS: '2',
      FLOW_EGRESS_ALLOW: '127.0.0.1',
      ENV_FILE: '/nonexistent/.env',
      MAX_SESSIONS_PER_CALLER: '0',
      SHUTDOWN_TIMEOUT_MS: '15000',
      ...extra,
    },
    '"msg":"playground threads up"',
  );

async function post(path: string, body: unknown) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

/** The log lines of a process, parsed (what is not JSON left out). */
const lines = (p: ServiceProcess) =>
  p
    .output()
    .split('\n')
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });

/** The thread whose log says it started the session. */
async function threadOf(p: ServiceProcess, sessionId: string): Promise<unknown> {
  const find = () =>
    lines(p).find((l) => l.msg === 'session started' && JSON.stringify(l).includes(sessionId))?.thread;
  await expect.poll(find, { timeout: 10_000, interval: 50 }).toBeDefined();
  return find();
}

/**
 * A call whose caller hears the greeting, says something (real speech) and hears the answer. A start that
 * reaches a thread already full (it is leaving the start subjects' queue group) is refused with 503 and tried
 * again after its Retry-After, as clients do.
 */
async function call() {
  let started = await post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } });
  for (let tries = 0; started.status === 503 && tries < 20; tries++) {
    await new Promise((r) => setTimeout(r, 1000 * Number(started.headers.get('retry-after') ?? 1)));
    started = await post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } });
  }
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const sessionId = started.body.sessionId as string;
  const client = new VoiceClient({ url: base.replace(/^http/, 'ws') + (started.body.audioPath as string) });
  await client.ready;
  await expect.poll(() => client.segments.length, { timeout: 60_000 }).toBeGreaterThan(0);
  client.say(speak(SAID));
  await expect.poll(() => client.segments.length, { timeout: 60_000 }).toBeGreaterThan(1);
  return { sessionId, client };
}

/** The stored conversation of a session. */
async function messagesOf(sessionId: string) {
  const res = await fetch(`${base}/api/agents/${agentId}/test-sessions/${sessionId}/messages`);
  return (await res.json()) as { role: string; content: string }[];
}

beforeAll(async () => {
  requireBuilt();
  const { flow } = await backends({ chat: clinicScript, transcribe: () => SAID });
  dir = mkdtempSync(join(tmpdir(), 'pg-threads-'));
  cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
  await start('agents');
  await start('sessions', { OWNER_SWEEP_INTERVAL_MS: '2000', OWNER_SWEEP_GRACE_MS: '2000' });
  const port = await freePort();
  await start('gateway', { PORT: String(port) });
  base = `http://127.0.0.1:${port}`;
  const agent = await post('/api/agents', {
    name: 'Threads',
    flow: flow(),
  });
  agentId = agent.body.id as string;
}, 180_000);

describe('a playground process on two threads (PLAYGROUND_THREADS=2)', () => {
  it('answers a spoken call on each thread, exports one /metrics, and stops on SIGTERM within its bound', async () => {
    const metricsPort = await freePort();
    const pg = await startThreads({ METRICS_PORT: String(metricsPort) });
    // each thread is an instance of its own, named after the process's
    const up = lines(pg).filter((l) => l.msg === 'playground instance up');
    expect(up.map((l) => l.thread).sort()).toEqual(['0', '1']);

    const first = await call();
    const second = await call();
    const threads = [await threadOf(pg, first.sessionId), await threadOf(pg, second.sessionId)];
    expect(threads.sort()).toEqual(['0', '1']);
    // what each caller said was heard, and answered, by the model its thread asked
    for (const { sessionId } of [first, second]) {
      await expect
        .poll(async () => (await messagesOf(sessionId)).map((m) => `${m.role}: ${m.content}`), {
          timeout: 30_000,
          interval: 200,
        })
        .toEqual(['assistant: Hello, how can I help?', `user: ${SAID}`, `assistant: ok: ${SAID}`]);
    }

    // one exposition for the process: each family once, every thread's series labelled with its thread
    const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text());
    const types = text.split('\n').filter((l) => l.startsWith('# TYPE '));
    expect(new Set(types).size).toBe(types.length);
    for (const thread of ['0', '1']) {
      expect(text).toMatch(
        new RegExp(`playground_sessions_active\\{session_type="voice",thread="${thread}"\\} 1\\n`),
      );
      expect(text).toMatch(new RegExp(`playground_sessions_capacity\\{thread="${thread}"\\} 1\\n`));
    }
    // what is the process's is counted once, by the main thread, without a thread label
    expect(text.match(/^process_cpu_user_seconds_total /gm)).toHaveLength(1);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes\{thread="main"\} /m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes\{thread="1"\} /m);
    const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { nats: 'up', redis: 'up' } });

    // SIGTERM: each thread ends its sessions (the callers hear the end) and the process exits 0 — within its
    // bound, or it would have exited 1
    pg.child.kill('SIGTERM');
    expect(await pg.exited).toBe(0);
    for (const { client } of [first, second]) {
      expect((await client.closed).code).toBe(1000);
      expect(client.events.find((e) => e.type === 'session_ended')).toMatchObject({ reason: 'shutdown' });
    }
    expect(
      lines(pg)
        .filter((l) => l.msg === 'shutdown complete')
        .map((l) => l.thread),
    ).toEqual(expect.arrayContaining(['0', '1', 'main']));
    // each thread recorded its call (its own recorder timeline thread and encoder host)
    for (const { sessionId } of [first, second]) {
      const record = (await fetch(`${base}/api/agents/${agentId}/test-sessions/${sessionId}`).then((r) =>
        r.json(),
      )) as { recording: { durationMs: number } | null };
      expect(record.recording?.durationMs, sessionId).toBeGreaterThan(1000);
    }
  }, 300_000);

  it('ends the process (exit 1) when a thread dies: the other thread’s session ends, the dead one’s caller is told', async () => {
    const trigger = join(dir, 'crash-thread-1');
    const pg = await startThreads({
      NODE_OPTIONS: `--require ${CRASH}`,
      CRASH_THREAD: '1',
      CRASH_THREAD_FILE: trigger,
    });
    const a = await call();
    const b = await call();
    const byThread = new Map([
      [await threadOf(pg, a.sessionId), a],
      [await threadOf(pg, b.sessionId), b],
    ]);
    writeFileSync(trigger, '');
    // decision 0037: a process missing a thread is not the process configured; it ends for the orchestrator to
    // restart it whole, its other threads drained as on SIGTERM
    const exitCode = await pg.exited;
    expect(exitCode, `signal ${pg.child.signalCode}:\n${pg.output().slice(-3000)}`).toBe(1);
    const output = lines(pg);
    // the crash is told by the thread itself, through its own redactor (thread-main.ts), then its end
    expect(output.find((l) => l.msg === 'playground thread crashed')).toMatchObject({
      thread: '1',
      code: 'THREAD_CRASHED',
      err: { message: 'a bug in a playground thread (injected by the test)' },
    });
    expect(output.find((l) => l.msg === 'playground thread ended')).toMatchObject({ thread: 1, exitCode: 1 });
    expect(output.find((l) => l.msg === 'cannot go on')).toMatchObject({
      reason: 'a playground thread ended',
    });
    // the surviving thread's caller was ended by its instance; the dead thread's, by the stack (its gateway
    // found the instance gone, as for a killed process)
    expect((await byThread.get('0')!.client.closed).code).toBe(1000);
    expect((await byThread.get('1')!.client.closed).code).toBe(4503);
  }, 300_000);
});
