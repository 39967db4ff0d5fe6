import { configOrExit, runBusService } from '@vab/service-kit';
import {
  canaryFrom,
  deploySweepFrom,
  limitsFrom,
  loadConfig,
  ownerSweepFrom,
  testRunsFrom,
} from './config.js';
import { startSessionsService } from './service.js';

const config = configOrExit('sessions', () => loadConfig(process.env));
runBusService('sessions', config, (deps) =>
  startSessionsService({
    ...deps,
    limits: limitsFrom(config),
    testRuns: testRunsFrom(config),
    ownerSweep: ownerSweepFrom(config),
    canary: canaryFrom(config),
    deploys: deploySweepFrom(config),
    liveMaxCallsPerAddress: config.LIVE_MAX_CALLS_PER_ADDRESS,
    retention: {
      testSessionDays: config.TEST_SESSION_RETENTION_DAYS,
      intervalMs: config.RETENTION_SWEEP_INTERVAL_MS,
    },
    callRetention: {
      defaultDays: config.CALL_RETENTION_DAYS,
      intervalMs: config.RETENTION_SWEEP_INTERVAL_MS,
    },
  }),
);
