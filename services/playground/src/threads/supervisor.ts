import { Worker } from 'node:worker_threads';
import { safeError } from '@vab/bus';
import {
  createLogger,
  runService,
  startOpsServer,
  type Check,
  type Logger,
  type MetricsConfig,
  type StopMode,
} from '@vab/service-kit';
import { pino } from 'pino';
import { collectDefaultMetrics } from 'prom-client';
import type { PlaygroundConfig } from '../config.js';
import { builtScript } from '../recording/built-script.js';
import { ThreadsRegistry } from './merged-metrics.js';
import type { FromThread, ThreadData, ThreadMetrics, ToThread } from './messages.js';

/** How long the main thread waits for a thread's metrics or checks: a thread that does not answer is left out. */
const ANSWER_TIMEOUT_MS = 2000;

/**
 * A thread's environment: the process's, with what makes it one instance among the process's threads. Its
 * INSTANCE_ID (`<id>-t<i>`: its NATS connection's name, its rooms' owner, the id the owner sweep and the reaper
 * know), its share of MAX_SESSIONS and ANALYSIS_CONCURRENCY (the shares add up to the process's), the CPU
 * threshold scaled to the threads (each measures the process's CPU: Node 20 has no thread's own), and no ops
 * port (the main thread's is the process's).
 */
export function threadEnv(
  config: Readonly<PlaygroundConfig>,
  env: NodeJS.ProcessEnv,
  index: number,
): Record<string, string> {
  const n = config.PLAYGROUND_THREADS;
  const share = (total: number) => Math.floor(total / n) + (index < total % n ? 1 : 0);
  const kept = Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined),
  );
  return {
    ...kept,
    PLAYGROUND_THREADS: '1',
    INSTANCE_ID: `${config.INSTANCE_ID}-t${index}`,
    MAX_SESSIONS: String(share(config.MAX_SESSIONS)),
    ANALYSIS_CONCURRENCY: String(share(config.ANALYSIS_CONCURRENCY)),
    LOAD_MAX_CPU_PERCENT: String(config.LOAD_MAX_CPU_PERCENT * n),
    METRICS_PORT: '',
  };
}

interface Thread {
  index: number;
  worker: Worker;
  /** Its exit code, once it exited. */
  exited: Promise<number>;
  ended: boolean;
  /** It ended when it was not asked to. */
  died: boolean;
}

export interface ThreadsOptions {
  config: Readonly<PlaygroundConfig>;
  /** The process's environment, each thread's built from it (threadEnv). */
  env: NodeJS.ProcessEnv;
  log: Logger;
  /** Where the threads' log lines go (each whole, its credentials already removed by its thread). */
  write(line: string): void;
  /** The threads' entry (a benchmark's wraps it); default: thread-main.js. */
  script?: string | URL | undefined;
  /** A message of a thread that is not the supervisor's (a benchmark's own). */
  onMessage?: ((thread: number, msg: unknown) => void) | undefined;
}

/**
 * The playground's threads, as the main thread holds them: started (the rooms thread last: LiveKit's native
 * events reach the thread that initialized it last), asked for their metrics and checks, stopped together.
 * A thread that ends when it was not asked to is reported by `died`.
 */
export class PlaygroundThreads {
  readonly count: number;
  private readonly threads: Thread[] = [];
  private next = 1;
  private readonly answers = new Map<number, (msg: FromThread) => void>();
  private stopping = false;
  private reportDeath!: (death: { thread: number; code: number }) => void;
  /** The first thread that ended on its own: the process cannot serve as configured any more. */
  readonly died = new Promise<{ thread: number; code: number }>((resolve) => (this.reportDeath = resolve));

  constructor(private readonly opts: ThreadsOptions) {
    this.count = opts.config.PLAYGROUND_THREADS;
  }

  /**
   * Starts every thread, one after another: each once the one before serves, thread 0 (rooms) last, once every
   * other has initialized LiveKit's native side. One at a time because two threads starting together once hung
   * both for good after they connected to NATS, in their native models' loading (the VAD's and the end-of-turn
   * model's, `prewarmVoiceModels`; seen in 1 of 4 starts, never once they were apart). Resolves once every
   * thread serves; rejects if one ends first, once the threads that had started stopped (drained, as on a
   * SIGTERM: they serve from the moment they are ready, so a session may already be on one; the process's
   * stop bound still holds, its timer set by the `died` that a thread's end also reports).
   */
  async start(): Promise<void> {
    try {
      for (let i = 1; i < this.count; i++) await this.spawn(i, false).ready;
      await this.spawn(0, true).ready;
    } catch (err) {
      await this.stop('a playground thread failed to start', 'drain');
      throw err;
    }
  }

  private spawn(index: number, rooms: boolean): { ready: Promise<void> } {
    const { opts } = this;
    const data: ThreadData = { index, rooms };
    const worker = new Worker(opts.script ?? builtScript(import.meta.url, 'thread-main.js'), {
      workerData: data,
      env: threadEnv(opts.config, opts.env, index),
      name: `playground-t${index}`,
    });
    const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
    const thread: Thread = { index, worker, exited, ended: false, died: false };
    this.threads.push(thread);
    let ready!: () => void;
    const ended = exited.then((code) => {
      throw new Error(`playground thread ${index} exited ${code} while starting`);
    });
    worker.on('message', (msg: FromThread) => {
      switch (msg.type) {
        case 'log':
          opts.write(msg.line);
          return;
        case 'ready':
          ready();
          return;
        case 'metrics':
        case 'checks':
          this.answers.get(msg.id)?.(msg);
          return;
        default:
          opts.onMessage?.(index, msg);
      }
    });
    // what ends a thread before its own handler of uncaught errors is installed (its modules' loading); after
    // that the thread logs its crash itself, through its redactor (thread-main.ts)
    worker.on('error', (err) =>
      opts.log.error({ thread: index, err: safeError(err) }, 'playground thread failed'),
    );
    void exited.then((code) => {
      thread.ended = true;
      if (this.stopping) return;
      thread.died = true;
      opts.log.error({ thread: index, exitCode: code }, 'playground thread ended');
      this.reportDeath({ thread: index, code });
    });
    const steps = { ready: Promise.race([new Promise<void>((r) => (ready = r)), ended]) };
    // a thread that ends after it started is `died`'s to report
    void steps.ready.catch(() => undefined);
    return steps;
  }

  /** Posts `msg` to thread `index` (a benchmark's own messages too). */
  post(index: number, msg: ToThread | Record<string, unknown>): void {
    const t = this.threads.find((x) => x.index === index);
    if (t && !t.ended) t.worker.postMessage(msg);
  }

  private ask<T extends FromThread>(t: Thread, type: 'metrics' | 'checks'): Promise<T | undefined> {
    if (t.ended) return Promise.resolve(undefined);
    const id = this.next++;
    return new Promise<T | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.answers.delete(id);
        resolve(undefined);
      }, ANSWER_TIMEOUT_MS);
      this.answers.set(id, (msg) => {
        clearTimeout(timer);
        this.answers.delete(id);
        resolve(msg as T);
      });
      t.worker.postMessage({ type, id } satisfies ToThread);
    });
  }

  /** Each thread's metrics (a thread that did not answer in time is left out). */
  async metrics(): Promise<{ thread: number; metrics: ThreadMetrics }[]> {
    const answers = await Promise.all(
      this.threads.map((t) => this.ask<Extract<FromThread, { type: 'metrics' }>>(t, 'metrics')),
    );
    return answers.flatMap((a, i) => (a ? [{ thread: this.threads[i]!.index, metrics: a.metrics }] : []));
  }

  /** A dependency as the process sees it: up when every thread reaches it. */
  async reached(dependency: string): Promise<boolean> {
    if (this.threads.length < this.count) return false;
    const answers = await Promise.all(
      this.threads.map((t) => this.ask<Extract<FromThread, { type: 'checks' }>>(t, 'checks')),
    );
    return answers.every((a) => a?.results[dependency] === true);
  }

  /**
   * Stops every thread (each drains its sessions as an instance does, within its bound), then lets the rooms
   * thread end LiveKit's native side. Resolves with 0 when every thread ended cleanly, else 1.
   */
  async stop(reason: string, mode: StopMode): Promise<number> {
    this.stopping = true;
    // a thread that had already ended was reported (died): the others are what the stop waits for
    const live = this.threads.filter((t) => !t.ended);
    for (const t of live) this.post(t.index, { type: 'stop', reason, mode } satisfies ToThread);
    const codes = await Promise.all(live.filter((t) => t.index !== 0).map((t) => t.exited));
    const rooms = live.find((t) => t.index === 0);
    if (rooms) {
      // a thread that died may have left LiveKit's native objects half torn down (decision 0037): disposing of
      // the native side over them is not worth a crash on the way out, the process ends anyway
      this.post(0, { type: 'dispose', native: !this.threads.some((t) => t.died) } satisfies ToThread);
      codes.push(await rooms.exited);
    }
    return codes.every((c) => c === 0) ? 0 : 1;
  }
}

/**
 * The playground process with PLAYGROUND_THREADS threads (decision 0037): this thread supervises them. It owns
 * what is the process's — the signals (SIGTERM: every thread drains, within SHUTDOWN_TIMEOUT_MS), `npm start`'s
 * channel, the ops port (`/metrics`: every thread's, labelled; `/readyz`: NATS and Redis reached by every
 * thread) and the log stream (each thread's lines, whole) — and serves nothing itself. A thread that ends on its
 * own ends the process the way a deaf process does (decision 19): the other threads drain, and the process
 * exits 1 for the orchestrator to restart it whole.
 */
export function superviseThreads(config: Readonly<PlaygroundConfig>): void {
  const out = pino.destination(1);
  const log = createLogger('playground', config.LOG_LEVEL, out, { base: { thread: 'main' } });
  const threads = new PlaygroundThreads({
    config,
    env: process.env,
    log,
    write: (line) => out.write(line),
  });
  const supervised = Boolean(config.STACK_ID) && process.channel !== undefined;
  runService(
    log,
    config.SHUTDOWN_TIMEOUT_MS,
    async (fail) => {
      const registry = new ThreadsRegistry(() => threads.metrics());
      collectDefaultMetrics({ register: registry });
      const checks: Record<string, Check> = { nats: () => threads.reached('nats') };
      if (config.REDIS_URL || config.REDIS_CLUSTER_NODES) checks.redis = () => threads.reached('redis');
      const ops =
        config.METRICS_PORT === undefined
          ? undefined
          : await startOpsServer({ config: config as MetricsConfig, registry, log, checks });
      void threads.died.then(({ thread, code }) =>
        fail('a playground thread ended', new Error(`thread ${thread} exited ${code}`)),
      );
      await threads.start();
      log.info(
        { instanceId: config.INSTANCE_ID, threads: threads.count, maxSessions: config.MAX_SESSIONS },
        'playground threads up',
      );
      if (supervised) process.send?.({ type: 'ready' });
      return async (mode) => {
        const code = await threads.stop('process stopping', mode);
        await ops?.close();
        if (code !== 0) throw new Error('a playground thread did not stop cleanly');
      };
    },
    { supervised },
  );
}
