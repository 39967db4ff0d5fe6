import { dispose } from '@livekit/rtc-node';
import { connectNats } from '@vab/bus';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  configOrExit,
  createLogger,
  idempotency,
  instrumentProcess,
  natsCheck,
  natsOptionsOf,
  redisCheck,
  RedisIdempotencyStore,
  runService,
  startOpsServer,
  startTracing,
  type Check,
} from '@vab/service-kit';
import { createRedis, redisTargetOf } from '@vab/storage';
import { loadConfig } from './config.js';
import { startPlaygroundService } from './service.js';
import { logLiveKitAs } from './telemetry.js';

const config = configOrExit('playground', () => loadConfig(process.env));
const log = createLogger('playground', config.LOG_LEVEL);
const tracing = startTracing('playground', config, log);
logLiveKitAs(config.LOG_LEVEL);

runService(log, config.SHUTDOWN_TIMEOUT_MS, async () => {
  const { registry } = instrumentProcess();
  const redis =
    config.REDIS_URL || config.REDIS_CLUSTER_NODES
      ? createRedis(redisTargetOf({ ...config, REDIS_URL: config.REDIS_URL ?? '' }), log, {
          name: 'playground',
        })
      : undefined;
  const bus: { nc?: NatsConnection } = {};
  // Redis is checked only when configured (it holds Idempotency-Keys); up before NATS, as in the others
  const checks: Record<string, Check> = {
    nats: async () => (bus.nc ? natsCheck(bus.nc)() : false),
  };
  if (redis) checks.redis = redisCheck(redis);
  const ops = await startOpsServer({ config, registry, log, checks });
  const nc = await connectNats(natsOptionsOf('playground', config, `playground-${config.INSTANCE_ID}`), log);
  bus.nc = nc;
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
    await ops?.close();
    await dispose();
    await tracing.shutdown();
  };
});
