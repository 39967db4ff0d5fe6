import { dispose } from '@livekit/rtc-node';
import { connectNats } from '@vab/bus';
import {
  configOrExit,
  createLogger,
  idempotency,
  natsOptionsOf,
  RedisIdempotencyStore,
  runService,
  startTracing,
} from '@vab/service-kit';
import { createRedis, redisTargetOf } from '@vab/storage';
import { loadConfig } from './config.js';
import { startPlaygroundService } from './service.js';

const config = configOrExit('playground', () => loadConfig(process.env));
const log = createLogger('playground', config.LOG_LEVEL);
const tracing = startTracing('playground', config, log);

runService(log, config.SHUTDOWN_TIMEOUT_MS, async () => {
  const nc = await connectNats(natsOptionsOf('playground', config, `playground-${config.INSTANCE_ID}`), log);
  const redis =
    config.REDIS_URL || config.REDIS_CLUSTER_NODES
      ? createRedis(redisTargetOf({ ...config, REDIS_URL: config.REDIS_URL ?? '' }), log, {
          name: 'playground',
        })
      : undefined;
  const service = startPlaygroundService({
    nc,
    log,
    config,
    tracing,
    ...(redis ? { idempotency: idempotency(new RedisIdempotencyStore(redis, 'pg:')) } : {}),
  });
  await service.ready;
  log.info({ instanceId: config.INSTANCE_ID, maxSessions: config.MAX_SESSIONS }, 'playground instance up');
  return async () => {
    // every session stops (agent, room, test session) before the connection that reaches them goes
    await service.stop(config.SHUTDOWN_TIMEOUT_MS - 1000);
    await nc.drain();
    await redis?.quit().catch(() => undefined);
    await dispose();
    await tracing.shutdown();
  };
});
