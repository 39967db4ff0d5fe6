import type { RedisClient } from '@vab/storage';
import type { AgentsDirectory } from './agents-directory.js';
import type { SessionsStore } from './store.js';
import type { TestRunner } from './testing/runner.js';
import type { TestingStore } from './testing/store.js';
import type { DomainEvents } from './live/domain-events.js';
import type { LiveDeploys } from './live/live-deploys.js';
import type { DeployPipeline } from './live/pipeline.js';
import type { LiveStore } from './live/credentials-store.js';
import type { CallsStore } from './live/calls-store.js';
import type { Recordings } from './recordings.js';
import type { CallErasure } from './live/call-erasure.js';

export interface Deps {
  store: SessionsStore;
  testing: TestingStore;
  runner: TestRunner;
  agents: AgentsDirectory;
  redis: RedisClient;
  pipeline: DeployPipeline;
  live: LiveStore;
  calls: CallsStore;
  callLimits: { maxMessages: number };
  recordings: Recordings;
  /** A call's recording and live events, removed with the call. */
  callErasure: CallErasure;
  liveDeploys: LiveDeploys;
  events: DomainEvents;
  /** How many days back agent-wide stats may reach (the retention period, or a year when kept forever). */
  statsMaxDays: number;
}
