import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, connectNats, type BusClient, type NatsOptions } from '@vab/bus';
import { createRedis, describeTarget, type RedisClient, type RedisTarget } from '@vab/storage';
import type { DestinationStream, Logger } from 'pino';
import type { BaseConfig } from './config.js';
import { runService, type StopMode } from './lifecycle.js';
import { createLogger } from './logger.js';
import { instrumentProcess, type MetricsConfig } from './metrics.js';
import { natsCheck, redisCheck, startOpsServer, type Check } from './ops-server.js';
import { startTracing, type Tracing } from './tracing.js';

/** How a service process connects to the bus, as its configuration says. */
export const natsOptionsOf = (service: string, config: BaseConfig, name = service): NatsOptions => ({
  url: config.NATS_URL,
  name,
  service,
  user: config.NATS_USER,
  pass: config.NATS_PASS,
});

/** What a process has once it is up: given to its service's start. */
export interface ProcessDeps {
  log: Logger;
  nc: NatsConnection;
  /** The process's one bus client (one reply inbox, one status watcher): `busClientOf(nc)`. */
  bus: BusClient;
  /** The process's store, when it has one. */
  redis: RedisClient | undefined;
  tracing: Tracing;
}

/** A running service as the process sees it. */
export interface Running {
  ready?: Promise<unknown> | undefined;
  /** Resolves when the service stopped serving on its own (`Served.closed`): the process then exits 1. */
  closed?: Promise<Error> | undefined;
  /**
   * Stops taking work and finishes what is in flight within `boundMs` (`drain`), or ends it at once (`now`:
   * the supervisor of `npm start` stopping); the connections are still open.
   */
  stop(boundMs: number, mode: StopMode): Promise<void>;
}

/**
 * What hosts a service that is not a whole process: a worker thread, whose process's main thread owns the
 * signals, the ops port and the supervisor's channel (the playground's threads, decision 0037). Its service
 * runs as a process's would, and exits its thread as it would the process.
 */
export interface ProcessHost {
  /** Given the stop, once: the host calls it instead of a signal. */
  stopOn(stop: (reason: string, mode: StopMode) => void): void;
  /** The service is up (what a supervised process tells its supervisor). */
  ready(): void;
  /** The dependency checks the process's `/readyz` would run, for the host's. */
  checks(checks: Record<string, Check>): void;
}

export interface ProcessOptions {
  service: string;
  config: BaseConfig & Partial<MetricsConfig>;
  /** The NATS connection's name (default: the service's), e.g. one per playground instance. */
  connectionName?: string | undefined;
  /** The process's store, connected before NATS and checked on `/readyz`; none: the process has no store. */
  redis?: RedisTarget | undefined;
  start(deps: ProcessDeps): Promise<Running> | Running;
  /** Runs after the connections closed (e.g. LiveKit's native side). */
  dispose?: (() => Promise<void>) | undefined;
  /** Where the process's log lines go (default: stdout), e.g. through a filter every line must pass. */
  logDestination?: DestinationStream | undefined;
  /** Fields on every line of the process's own logger (e.g. the thread a line came from). */
  logFields?: Record<string, string> | undefined;
  /** Runs the service in a worker thread of a process (see ProcessHost); none: it is the whole process. */
  host?: ProcessHost | undefined;
}

/**
 * The one start-up of a service process: logger, tracing, metrics, its Redis (if any), the ops server
 * (`METRICS_PORT`), NATS, the service, and the lifecycle. On SIGTERM: stop taking work, finish what is in
 * flight, drain NATS, close Redis, within SHUTDOWN_TIMEOUT_MS. A service that stops serving on its own
 * (a subscription closed under it) ends the process the same way with exit code 1: nats.js's own service
 * closes itself and reports; the process is restarted rather than left up and deaf to a subject.
 * Started by `npm start`'s supervisor (STACK_ID set, an IPC channel open), it tells the supervisor once it is
 * up (`{ type: 'ready' }`), and stops `now` when that channel closes (lifecycle.ts).
 */
export function runProcess(opts: ProcessOptions): void {
  const { service, config } = opts;
  const log = createLogger(service, config.LOG_LEVEL, opts.logDestination, { base: opts.logFields });
  const tracing = startTracing(service, config, log);
  const { host } = opts;
  const supervised = !host && Boolean(config.STACK_ID) && process.channel !== undefined;
  runService(
    log,
    config.SHUTDOWN_TIMEOUT_MS,
    async (fail) => {
      const { registry } = instrumentProcess();
      const redis = opts.redis && createRedis(opts.redis, log, { name: service });
      if (opts.redis) log.info({ redis: describeTarget(opts.redis) }, 'storage');
      const bus: { nc?: NatsConnection } = {};
      // up before NATS: while the bus is not there yet, /healthz answers and /readyz says so
      const checks: Record<string, Check> = { nats: async () => (bus.nc ? natsCheck(bus.nc)() : false) };
      if (redis) checks.redis = redisCheck(redis);
      host?.checks(checks);
      const ops =
        config.METRICS_PORT === undefined
          ? undefined
          : await startOpsServer({ config: config as MetricsConfig, registry, log, checks });
      const nc = await connectNats(natsOptionsOf(service, config, opts.connectionName), log);
      bus.nc = nc;
      const running = await opts.start({ log, nc, bus: busClientOf(nc), redis, tracing });
      await running.ready;
      void running.closed?.then((err) => fail('stopped serving', err));
      if (supervised) process.send?.({ type: 'ready' });
      host?.ready();
      return async (mode) => {
        await running.stop(config.SHUTDOWN_TIMEOUT_MS - 1000, mode);
        await nc.drain();
        await redis?.quit().catch(() => undefined);
        await ops?.close();
        await opts.dispose?.();
        await tracing.shutdown();
      };
    },
    { supervised, stopOn: host && ((stop) => host.stopOn(stop)) },
  );
}
