import { configOrExit, runBusService } from '@vab/service-kit';
import { loadConfig } from './config.js';
import { settingsOf, startWebhooksService } from './service.js';

const config = configOrExit('webhooks', () => loadConfig(process.env));
runBusService('webhooks', config, (deps) => startWebhooksService({ ...deps, settings: settingsOf(config) }));
