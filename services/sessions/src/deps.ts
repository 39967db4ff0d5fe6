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
import type { AnalysisQueue } from './analysis/analysis-queue.js';
import type { AnalysisSettingsStore } from './analysis/analysis-settings.js';
import type { CallErasure } from './live/call-erasure.js';
import type { CanaryJudge } from './live/canary.js';

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
  analysisSettings: AnalysisSettingsStore;
  analysisQueue: AnalysisQueue;
  /** Judges, promotes and rolls back an agent's canary (decision 0035). */
  canary: CanaryJudge;
  /** How long a caller keeps the side of a canary it was drawn on (CANARY_STICKY_MS). */
  canaryStickyMs: number;
  /** How many days back agent-wide stats may reach (the retention period, or a year when kept forever). */
  statsMaxDays: number;
}
