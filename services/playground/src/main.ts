import { connectNats, createLogger, onShutdownSignal } from '@vab/bus';
import { loadConfig } from './config.js';
import { startPlaygroundService } from './service.js';

const config = loadConfig(process.env);
const log = createLogger('playground', config.LOG_LEVEL);
const nc = await connectNats(
  { url: config.NATS_URL, name: 'playground', user: config.NATS_USER, pass: config.NATS_PASS },
  log,
);
const served = startPlaygroundService({ nc, log, config });
await served.ready;

onShutdownSignal(log, config.SHUTDOWN_TIMEOUT_MS, async () => {
  await served.stop(config.SHUTDOWN_TIMEOUT_MS - 1000);
  await nc.drain();
});
