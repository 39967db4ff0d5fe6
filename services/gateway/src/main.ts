import { configOrExit, createAccessLog, runProcess } from '@vab/service-kit';
import { createRedis, redisTargetOf } from '@vab/storage';
import { buildGateway } from './app.js';
import { eventStreamsOf, loadConfig, securityOf } from './config.js';

const config = configOrExit('gateway', () => loadConfig(process.env));

runProcess({
  service: 'gateway',
  config,
  start: async ({ nc, log, tracing }) => {
    // counters only: a request never waits for a Redis that is down (no offline queue, one retry)
    const rateLimitRedis =
      config.RATE_LIMIT_REDIS_CLUSTER_NODES || config.RATE_LIMIT_REDIS_URL
        ? createRedis(
            redisTargetOf({
              REDIS_URL: config.RATE_LIMIT_REDIS_URL ?? '',
              REDIS_CLUSTER_NODES: config.RATE_LIMIT_REDIS_CLUSTER_NODES,
            }),
            log,
            { name: 'gateway-rate-limit', offlineQueue: false },
          )
        : undefined;
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
    return {
      // close() stops accepting connections and waits for in-flight requests; then the bus is drained
      stop: async () => {
        await app.close();
        await rateLimitRedis?.quit().catch(() => undefined);
      },
    };
  },
});
