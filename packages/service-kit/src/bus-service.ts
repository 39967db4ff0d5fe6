import type { NatsConnection } from '@nats-io/transport-node';
import type { Served } from '@vab/bus';
import { redisTargetOf, WriteConcern, type RedisClient } from '@vab/storage';
import type { Logger } from 'pino';
import type { BaseConfig, RedisConfig } from './config.js';
import type { MetricsConfig } from './metrics.js';
import { runProcess } from './run-process.js';

export { natsOptionsOf } from './run-process.js';

/**
 * The whole process of a service that serves subjects from its Redis (agents, sessions): `runProcess` with
 * the Redis its configuration names, and the write concern (`REDIS_WAIT_REPLICAS`) over it.
 */
export function runBusService(
  service: string,
  config: BaseConfig & RedisConfig & MetricsConfig,
  start: (deps: { nc: NatsConnection; redis: RedisClient; writes: WriteConcern; log: Logger }) => Served,
): void {
  runProcess({
    service,
    config,
    redis: redisTargetOf(config),
    start: ({ nc, redis, log }) => {
      if (!redis) throw new Error('no Redis connection'); // given above: never
      const store = redis;
      log.info({ waitReplicas: config.REDIS_WAIT_REPLICAS }, 'write concern');
      const writes = new WriteConcern(store, config.REDIS_WAIT_REPLICAS, config.REDIS_WAIT_TIMEOUT_MS);
      return start({ nc, redis: store, writes, log });
    },
  });
}
