import { connectNats } from '@vab/bus';
import {
  configOrExit,
  createAccessLog,
  createLogger,
  instrumentProcess,
  natsOptionsOf,
  runService,
  startTracing,
} from '@vab/service-kit';
import { buildGateway } from './app.js';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { redisTargetOf } from '@vab/storage';
import { eventStreamsOf, loadConfig, securityOf } from './config.js';

const config = configOrExit('gateway', () => loadConfig(process.env));
const log = createLogger('gateway', config.LOG_LEVEL);
const tracing = startTracing('gateway', config, log);

runService(log, config.SHUTDOWN_TIMEOUT_MS, async () => {
  instrumentProcess();
  const nc = await connectNats(natsOptionsOf('gateway', config), log);
  // counters only: a request never waits for a Redis that is down (no offline queue, one retry)
  const options: RedisOptions = { maxRetriesPerRequest: 1, connectTimeout: 2000, enableOfflineQueue: false };
  const target =
    config.RATE_LIMIT_REDIS_CLUSTER_NODES || config.RATE_LIMIT_REDIS_URL
      ? redisTargetOf({
          REDIS_URL: config.RATE_LIMIT_REDIS_URL ?? '',
          REDIS_CLUSTER_NODES: config.RATE_LIMIT_REDIS_CLUSTER_NODES,
        })
      : undefined;
  const rateLimitRedis = !target
    ? undefined
    : 'url' in target
      ? new Redis(target.url, options)
      : new Cluster(target.clusterNodes, { redisOptions: options, enableOfflineQueue: false });
  rateLimitRedis?.on('error', (err: Error) =>
    log.warn({ code: 'RATE_LIMIT_REDIS_ERROR', err: err.message }, 'rate-limit redis error'),
  );
  const app = await buildGateway({
    nc,
    log,
    accessLog: createAccessLog('gateway', config.LOG_LEVEL),
    tracing,
    config: {
      ...config,
      security: { ...securityOf(config), rateLimitRedis },
      events: eventStreamsOf(config),
    },
  });
  const address = await app.listen({ host: config.HOST, port: config.PORT });
  log.info({ address }, 'gateway listening');
  return async () => {
    // close() stops accepting connections and waits for in-flight requests; then the bus is drained.
    await app.close();
    await nc.drain();
    await rateLimitRedis?.quit().catch(() => undefined);
    await tracing.shutdown();
  };
});
