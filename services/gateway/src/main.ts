import { connectNats, createLogger, runService } from '@vab/bus';
import { buildGateway } from './app.js';
import { loadConfig } from './config.js';

const config = loadConfig(process.env);
const log = createLogger('gateway', config.LOG_LEVEL);

runService(log, config.SHUTDOWN_TIMEOUT_MS, async () => {
  const nc = await connectNats(
    { url: config.NATS_URL, name: 'gateway', user: config.NATS_USER, pass: config.NATS_PASS },
    log,
  );
  const app = await buildGateway({ nc, log, config });
  const address = await app.listen({ host: config.HOST, port: config.PORT });
  log.info({ address }, 'gateway listening');
  return async () => {
    // close() stops accepting connections and waits for in-flight requests; then the bus is drained.
    await app.close();
    await nc.drain();
  };
});
