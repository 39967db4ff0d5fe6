import { connectNats, createLogger, runService } from '@vab/bus';
import { createRedis } from '@vab/storage';
import { limitsFrom, loadConfig } from './config.js';
import { startSessionsService } from './service.js';

const config = loadConfig(process.env);
const log = createLogger('sessions', config.LOG_LEVEL);

runService(log, config.SHUTDOWN_TIMEOUT_MS, async () => {
  const redis = createRedis(config.REDIS_URL, log, { name: 'sessions' });
  const nc = await connectNats(
    {
      url: config.NATS_URL,
      name: 'sessions',
      service: 'sessions',
      user: config.NATS_USER,
      pass: config.NATS_PASS,
    },
    log,
  );
  const served = startSessionsService({ nc, redis, log, limits: limitsFrom(config) });
  await served.ready;
  return async () => {
    await served.stop(config.SHUTDOWN_TIMEOUT_MS - 1000);
    await nc.drain();
    await redis.quit();
  };
});
