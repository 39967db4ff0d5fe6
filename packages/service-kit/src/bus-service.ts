import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats, type NatsOptions, type Served } from '@vab/bus';
import { createRedis, describeTarget, redisTargetOf, WriteConcern, type RedisClient } from '@vab/storage';
import type { Logger } from 'pino';
import type { BaseConfig, RedisConfig } from './config.js';
import { runService } from './lifecycle.js';
import { createLogger } from './logger.js';
import { instrumentProcess, type MetricsConfig } from './metrics.js';
import { natsCheck, redisCheck, startOpsServer } from './ops-server.js';
import { startTracing } from './tracing.js';

/** How a service process connects to the bus, as its configuration says. */
export const natsOptionsOf = (service: string, config: BaseConfig, name = service): NatsOptions => ({
  url: config.NATS_URL,
  name,
  service,
  user: config.NATS_USER,
  pass: config.NATS_PASS,
});

/**
 * The whole process of a service that serves subjects from its Redis: logger, Redis and NATS connections,
 * the service, and the lifecycle (on SIGTERM: stop taking work, finish what is in flight, drain NATS, close
 * Redis, within SHUTDOWN_TIMEOUT_MS).
 */
export function runBusService(
  service: string,
  config: BaseConfig & RedisConfig & MetricsConfig,
  start: (deps: { nc: NatsConnection; redis: RedisClient; writes: WriteConcern; log: Logger }) => Served,
): void {
  const log = createLogger(service, config.LOG_LEVEL);
  const tracing = startTracing(service, config, log);
  runService(log, config.SHUTDOWN_TIMEOUT_MS, async () => {
    const target = redisTargetOf(config);
    log.info({ redis: describeTarget(target), waitReplicas: config.REDIS_WAIT_REPLICAS }, 'storage');
    const { registry } = instrumentProcess();
    const redis = createRedis(target, log, { name: service });
    const writes = new WriteConcern(redis, config.REDIS_WAIT_REPLICAS, config.REDIS_WAIT_TIMEOUT_MS);
    const bus: { nc?: NatsConnection } = {};
    // up before NATS: while the bus is not there yet, /healthz answers and /readyz says so
    const ops = await startOpsServer({
      config,
      registry,
      log,
      checks: { nats: async () => (bus.nc ? natsCheck(bus.nc)() : false), redis: redisCheck(redis) },
    });
    const nc = await connectNats(natsOptionsOf(service, config), log);
    bus.nc = nc;
    const served = start({ nc, redis, writes, log });
    await served.ready;
    return async () => {
      await served.stop(config.SHUTDOWN_TIMEOUT_MS - 1000);
      await nc.drain();
      await redis.quit();
      await ops?.close();
      await tracing.shutdown();
    };
  });
}
