import { runBusService } from '@vab/service-kit';
import { loadConfig } from './config.js';
import { startAgentsService } from './service.js';

runBusService('agents', loadConfig(process.env), startAgentsService);
