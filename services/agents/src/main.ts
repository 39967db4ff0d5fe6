import { connectNats, createLogger, runService } from '@vab/bus';
import { createRedis } from '@vab/storage';
import { loadConfig } from './config.js';
import { startAgentsService } from './service.js';

const config = loadConfig(process.env);
const log = createLogger('agents', config.LOG_LEVEL);

runService(log, config.SHUTDOWN_TIMEOUT_MS, async () => {
  const redis = createRedis(config.REDIS_URL, log, { name: 'agents' });
  const nc = await connectNats(
    {
      url: config.NATS_URL,
      name: 'agents',
      service: 'agents',
      user: config.NATS_USER,
      pass: config.NATS_PASS,
    },
    log,
  );
  const served = startAgentsService({ nc, redis, log });
  await served.ready;
  return async () => {
    await served.stop(config.SHUTDOWN_TIMEOUT_MS - 1000);
    await nc.drain();
    await redis.quit();
  };
});
