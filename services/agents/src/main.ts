import { configOrExit, runBusService } from '@vab/service-kit';
import { loadConfig } from './config.js';
import { startAgentsService } from './service.js';

const config = configOrExit('agents', () => loadConfig(process.env));
runBusService('agents', config, (deps) =>
  startAgentsService({ ...deps, maxVersions: config.MAX_VERSIONS_PER_AGENT }),
);
