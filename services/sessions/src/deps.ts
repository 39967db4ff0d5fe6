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
}
