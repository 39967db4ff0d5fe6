import type { RedisClient } from '@vab/storage';
import type { AgentsDirectory } from './agents-directory.js';
import type { SessionsStore } from './store.js';

export interface Deps {
  store: SessionsStore;
  agents: AgentsDirectory;
  redis: RedisClient;
}
