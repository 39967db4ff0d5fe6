import { runBusService } from '@vab/service-kit';
import { limitsFrom, loadConfig } from './config.js';
import { startSessionsService } from './service.js';

const config = loadConfig(process.env);
runBusService('sessions', config, (deps) => startSessionsService({ ...deps, limits: limitsFrom(config) }));
