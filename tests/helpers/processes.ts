import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  startLocalNats,
  startLocalRedis,
  startOpenAiStub,
  startSpeechStub,
  stopOnExit,
  voiceFlow,
  type Script,
} from '@vab/testkit';
import { afterAll, vi } from 'vitest';

// The built entry points (`npm test` builds first), run as an operator would.
const root = join(import.meta.dirname, '..', '..');
export const mainOf = (svc: string) => join(root, 'services', svc, 'dist', 'main.js');

/** Every service the deployment runs (a process, a compose service and a Prometheus job each), sorted. */
export const SERVICES = ['agents', 'gateway', 'playground', 'sessions', 'telephony', 'webhooks'] as const;

/**
 * For a suite that runs the built entry points: fails it (as a `beforeAll`) with the command that builds them,
 * because a suite that skipped itself when nothing was built passed a bare `vitest run` having tested nothing.
 */
/** Whether every service is built (a suite that may skip itself, as resilience.test.ts does). */
export const built = () =>
  ['agents', 'sessions', 'playground', 'webhooks', 'gateway'].every((s) => existsSync(mainOf(s)));

export function requireBuilt(): void {
  const missing = ['agents', 'sessions', 'playground', 'webhooks', 'gateway']
    .map(mainOf)
    .filter((main) => !existsSync(main))
    .map((main) => main.slice(root.length + 1));
  if (missing.length > 0) {
    throw new Error(
      `this suite runs the built services and ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing: ` +
        'run `npx turbo run build` first (`npm test` builds before it tests)',
    );
  }
}

export interface ServiceProcess {
  /** The service this process runs (`gateway`, `playground`, …). */
  name: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  waitFor(text: string, timeoutMs?: number): Promise<void>;
  output(): string;
}

/**
 * A playground process's admission by load, off: it measures the machine, and a test's machine is busy with the
 * rest of the suite (at load average 15–29 the instances refused every session with CAPACITY_EXHAUSTED). A test
 * about load sets its own thresholds (tests/integration/stack/resilience.test.ts).
 */
const ADMISSION_OFF = { LOAD_MAX_EVENT_LOOP_P99_MS: '0', LOAD_MAX_BEHIND_MS: '0', LOAD_MAX_CPU_PERCENT: '0' };

export function spawnService(svc: string, env: Record<string, string>): ServiceProcess {
  const child = stopOnExit(
    spawn(process.execPath, [mainOf(svc)], {
      env: { PATH: process.env.PATH ?? '', ...(svc === 'playground' ? ADMISSION_OFF : {}), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // a process start has no bound of its own: a playground took over 10 s to say "serving" at load average 30
  // (LiveKit and the VAD model loading), so the wait is the suite's hook/test timeout, not a guess below it
  const waitFor = (text: string, timeoutMs = 30_000) =>
    vi.waitFor(
      () => {
        if (!out.includes(text)) throw new Error(`no "${text}" in output of ${svc}:\n${out.slice(-2000)}`);
      },
      { timeout: timeoutMs, interval: 20 },
    );
  return { name: svc, child, exited, waitFor, output: () => out };
}

/**
 * Waits until the gateway at `base` answers `/readyz` with 200. Fails at once when one of `procs` has exited
 * (with its output: a port taken, a bad variable), and at `timeoutMs` with what `/readyz` said last and each
 * process's last lines: a stack that never became ready must say which service was missing and why, not only
 * that it timed out (a clean-clone CI run once failed here with no more than the timeout).
 */
export async function untilStackReady(
  base: string,
  procs: ServiceProcess[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  for (;;) {
    const dead = procs.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
    if (dead) {
      throw new Error(
        `${dead.name} exited (${dead.child.exitCode ?? dead.child.signalCode}) before the stack was ready:\n` +
          dead.output().slice(-3000),
      );
    }
    const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(5_000) }).catch(
      (err: unknown) => err as Error,
    );
    if (!(res instanceof Error) && res.ok) return;
    last = res instanceof Error ? res.message : `${res.status} ${await res.text().catch(() => '')}`;
    if (Date.now() > deadline) {
      const outputs = procs.map((p) => `--- ${p.name}:\n${p.output().slice(-1500) || '(no output)'}`);
      throw new Error(
        `the stack did not become ready within ${timeoutMs} ms; /readyz said: ${last}\n${outputs.join('\n')}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Undoing a suite's setup: each step pushed as it is set up. */
export type Cleanup = (() => Promise<unknown>)[];

/**
 * A suite's cleanup, run after all its tests, last set up first; a step that fails is passed over so the rest
 * (a process still to kill, a server to stop) still runs.
 */
export function cleanupAfterAll(): Cleanup {
  const cleanup: Cleanup = [];
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
  });
  return cleanup;
}

/** The line a built service logs once it serves. */
export const readyLine = (svc: string) => (svc === 'gateway' ? 'gateway listening' : '"msg":"serving"');

/**
 * A built service spawned and waited for until it serves (`ready`: another line to wait for); its kill
 * (SIGKILL, waited for) goes on `cleanup` first, so a process that never got ready is not left behind either.
 */
export async function startService(
  svc: string,
  env: Record<string, string>,
  cleanup: Cleanup,
  opts: { ready?: string; timeoutMs?: number } = {},
): Promise<ServiceProcess> {
  const p = spawnService(svc, env);
  cleanup.push(async () => {
    p.child.kill('SIGKILL');
    await p.exited;
  });
  await p.waitFor(opts.ready ?? readyLine(svc), opts.timeoutMs);
  return p;
}

/**
 * What a suite of built service processes runs on: a NATS and a Redis of its own, a chat stub and a speech stub
 * (`transcribe`: what its STT hears), each stopped by `cleanup`. `env`: what every process of the suite is
 * given; `flow`: the clinic's voice flow with its models at the stubs (`agent`: params of its agent node).
 */
export async function startBackends(
  cleanup: Cleanup,
  opts: { chat: Script; transcribe: (index: number, durationMs: number) => string },
) {
  const nats = await startLocalNats();
  cleanup.push(() => nats.dispose());
  const redis = await startLocalRedis();
  cleanup.push(() => redis.dispose());
  const chat = await startOpenAiStub(opts.chat);
  cleanup.push(() => chat.close());
  const speech = await startSpeechStub({ transcribe: opts.transcribe });
  cleanup.push(() => speech.close());
  return {
    natsUrl: nats.url,
    chat,
    speech,
    env: { NATS_URL: nats.url, REDIS_URL: redis.url, SHUTDOWN_TIMEOUT_MS: '5000', LOG_LEVEL: 'info' },
    flow: (agent?: Record<string, unknown>) =>
      voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL, agent }),
  };
}
export type Backends = Awaited<ReturnType<typeof startBackends>>;

/**
 * A suite of built service processes on backends of its own: `cleanup` runs after all its tests (last set up
 * first); `backends` starts what the processes run on (in the suite's beforeAll); `start` spawns a service with
 * the backends' env and `extra`, and waits until it serves (`ready`: another line to wait for).
 */
export function processSuite(opts: { timeoutMs?: number } = {}) {
  const cleanup = cleanupAfterAll();
  let env: Record<string, string> = {};
  return {
    cleanup,
    async backends(b: Parameters<typeof startBackends>[1]): Promise<Backends> {
      const started = await startBackends(cleanup, b);
      env = started.env;
      return started;
    },
    start: (svc: string, extra: Record<string, string> = {}, ready?: string) =>
      startService(svc, { ...env, ...extra }, cleanup, { ready, timeoutMs: opts.timeoutMs }),
  };
}
