import type { RedisClient } from '@vab/storage';
import type { AgentsDirectory } from './agents-directory.js';
import type { SessionsStore } from './store.js';
import type { TestRunner } from './testing/runner.js';
import type { TestingStore } from './testing/store.js';

export interface Deps {
  store: SessionsStore;
  testing: TestingStore;
  runner: TestRunner;
  agents: AgentsDirectory;
  redis: RedisClient;
  /** How many days back agent-wide stats may reach (the retention period, or a year when kept forever). */
  statsMaxDays: number;
}
