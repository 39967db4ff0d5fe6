import { dispose } from '@livekit/rtc-node';
import { configOrExit, idempotency, RedisIdempotencyStore, runProcess } from '@vab/service-kit';
import { redisTargetOf } from '@vab/storage';
import { pino } from 'pino';
import { loadConfig } from './config.js';
import { redactingDestination } from './sessions/redactor.js';
import { surviveLiveKitRejections } from './models/stray-rejections.js';
import { startPlaygroundService } from './service.js';
import { logLiveKitAs } from './observability/telemetry.js';

const config = configOrExit('playground', () => loadConfig(process.env));
// every line of the process, LiveKit's and ours, passes one filter: the exact credentials in play removed
const logDestination = redactingDestination(pino.destination(1));
// LiveKit Agents logs in the stack's format, with the session's ids (before any of its loggers exists)
logLiveKitAs(config.LOG_LEVEL, logDestination);

runProcess({
  service: 'playground',
  config,
  connectionName: `playground-${config.INSTANCE_ID}`,
  // Redis only when configured (it holds Idempotency-Keys); checked on /readyz then
  redis:
    config.REDIS_URL || config.REDIS_CLUSTER_NODES
      ? redisTargetOf({ ...config, REDIS_URL: config.REDIS_URL ?? '' })
      : undefined,
  start: async ({ nc, log, redis, tracing }) => {
    surviveLiveKitRejections(log);
    const service = startPlaygroundService({
      nc,
      log,
      config,
      tracing,
      ...(redis ? { idempotency: idempotency(new RedisIdempotencyStore(redis, 'pg:')) } : {}),
    });
    await service.ready;
    log.info({ instanceId: config.INSTANCE_ID, maxSessions: config.MAX_SESSIONS }, 'playground instance up');
    // stop: every session stops (agent, room, test session) before the connection that reaches them goes
    return service;
  },
  dispose,
  logDestination,
});
