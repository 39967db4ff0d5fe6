import type { NatsConnection } from '@nats-io/transport-node';
import { serve, type HandlerTable, type Logger, type Served } from '@vab/bus';
import { idempotency, RedisIdempotencyStore } from '@vab/service-kit';
import type { RedisClient, WriteConcern } from '@vab/storage';
import { OwnerSweep } from './owner-sweep.js';
import { Recordings } from './recordings.js';
import { CallErasure } from './live/call-erasure.js';
import { CallRetention, type CallRetentionSettings } from './live/call-retention.js';
import { SessionRetention, type RetentionSettings } from './retention.js';
import { AgentsDirectory } from './agents-directory.js';
import { DEFAULT_DEPLOYS, DEFAULT_LIMITS, interruptedAfterMsOf, type SessionsLimits } from './config.js';
import type { Deps } from './deps.js';
import { conversationsAppend } from './handlers/conversations-append.js';
import { conversationsList } from './handlers/conversations-list.js';
import { deploysCreate } from './handlers/deploys-create.js';
import { deploysList } from './handlers/deploys-list.js';
import { deploysUpdate } from './handlers/deploys-update.js';
import { deploysPinned } from './handlers/deploys-pinned.js';
import { deploysStop } from './handlers/deploys-stop.js';
import { deployGateGet } from './handlers/deploy-gate-get.js';
import { deployGateSet } from './handlers/deploy-gate-set.js';
import { testCasesCreate } from './handlers/test-cases-create.js';
import { testCasesDelete } from './handlers/test-cases-delete.js';
import { testCasesGet } from './handlers/test-cases-get.js';
import { testCasesList } from './handlers/test-cases-list.js';
import { testCasesUpdate } from './handlers/test-cases-update.js';
import { testRunsCreate } from './handlers/test-runs-create.js';
import { testRunsGet } from './handlers/test-runs-get.js';
import { testRunsList } from './handlers/test-runs-list.js';
import { TestRunner, type RunnerSettings } from './testing/runner.js';
import { TestingStore } from './testing/store.js';
import { messagesAppend } from './handlers/messages-append.js';
import { messagesList } from './handlers/messages-list.js';
import { sessionsHealth } from './handlers/sessions-health.js';
import { statsAgent } from './handlers/stats-agent.js';
import { statsVersion } from './handlers/stats-version.js';
import { testSessionsClose } from './handlers/test-sessions-close.js';
import { testSessionsCreate } from './handlers/test-sessions-create.js';
import { testSessionsGet } from './handlers/test-sessions-get.js';
import { testSessionsList } from './handlers/test-sessions-list.js';
import { testSessionsRecording } from './handlers/test-sessions-recording.js';
import { SessionsStore } from './store.js';
import { callsAdmit } from './handlers/calls-admit.js';
import { callsAppend } from './handlers/calls-append.js';
import { callsEnd } from './handlers/calls-end.js';
import { callsRecording } from './handlers/calls-recording.js';
import { callsList } from './handlers/calls-list.js';
import { callsGet } from './handlers/calls-get.js';
import { callsErase } from './handlers/calls-erase.js';
import { CallsStore } from './live/calls-store.js';
import { AnalysisQueue } from './analysis/analysis-queue.js';
import { AnalysisSettingsStore } from './analysis/analysis-settings.js';
import { analysisSettingsGet } from './handlers/analysis-settings-get.js';
import { analysisSettingsSet } from './handlers/analysis-settings-set.js';
import { callsAnalyze } from './handlers/calls-analyze.js';
import { callsAnalysisStore } from './handlers/calls-analysis-store.js';
import { deploysStats } from './handlers/deploys-stats.js';
import { deploysCompare } from './handlers/deploys-compare.js';
import { deploysPromote } from './handlers/deploys-promote.js';
import { LiveStore } from './live/credentials-store.js';
import { credentialsStatus } from './handlers/credentials-status.js';
import { credentialsSealed } from './handlers/credentials-sealed.js';
import { credentialsStore } from './handlers/credentials-store.js';
import { publicKeysCreate } from './handlers/public-keys-create.js';
import { publicKeysList } from './handlers/public-keys-list.js';
import { publicKeysRevoke } from './handlers/public-keys-revoke.js';
import { callSettingsGet } from './handlers/call-settings-get.js';
import { callSettingsSet } from './handlers/call-settings-set.js';
import { publicKeysVerify } from './handlers/public-keys-verify.js';
import { livePage } from './handlers/live-page.js';
import { DomainEvents } from './live/domain-events.js';
import { LiveDeploys } from './live/live-deploys.js';
import { DeployPipeline } from './live/pipeline.js';
import { CanaryJudge } from './live/canary.js';
import { DeploySweep } from './live/deploy-sweep.js';

export function sessionsHandlers(deps: Deps): HandlerTable<'sessions'> {
  return {
    'sessions.conversations.list': conversationsList(deps),
    'sessions.conversations.append': conversationsAppend(deps),
    'sessions.test-sessions.create': testSessionsCreate(deps),
    'sessions.test-sessions.list': testSessionsList(deps),
    'sessions.test-sessions.get': testSessionsGet(deps),
    'sessions.test-sessions.close': testSessionsClose(deps),
    'sessions.test-sessions.recording': testSessionsRecording(deps),
    'sessions.messages.list': messagesList(deps),
    'sessions.messages.append': messagesAppend(deps),
    'sessions.deploys.create': deploysCreate(deps),
    'sessions.deploys.list': deploysList(deps),
    'sessions.deploys.update': deploysUpdate(deps),
    'sessions.deploys.pinned': deploysPinned(deps),
    'sessions.deploys.stop': deploysStop(deps),
    'sessions.deploys.gate.get': deployGateGet(deps),
    'sessions.deploys.gate.set': deployGateSet(deps),
    'sessions.test-cases.create': testCasesCreate(deps),
    'sessions.test-cases.list': testCasesList(deps),
    'sessions.test-cases.get': testCasesGet(deps),
    'sessions.test-cases.update': testCasesUpdate(deps),
    'sessions.test-cases.delete': testCasesDelete(deps),
    'sessions.runs.create': testRunsCreate(deps),
    'sessions.runs.list': testRunsList(deps),
    'sessions.runs.get': testRunsGet(deps),
    'sessions.stats.version': statsVersion(deps),
    'sessions.stats.agent': statsAgent(deps),
    'sessions.health': sessionsHealth(deps),
    'sessions.calls.admit': callsAdmit(deps),
    'sessions.calls.append': callsAppend(deps),
    'sessions.calls.end': callsEnd(deps),
    'sessions.calls.recording': callsRecording(deps),
    'sessions.calls.list': callsList(deps),
    'sessions.calls.get': callsGet(deps),
    'sessions.calls.erase': callsErase(deps),
    'sessions.calls.settings.get': callSettingsGet(deps),
    'sessions.calls.settings.set': callSettingsSet(deps),
    'sessions.analysis.settings.get': analysisSettingsGet(deps),
    'sessions.analysis.settings.set': analysisSettingsSet(deps),
    'sessions.calls.analyze': callsAnalyze(deps),
    'sessions.calls.analysis.store': callsAnalysisStore(deps),
    'sessions.deploys.stats': deploysStats(deps),
    'sessions.deploys.compare': deploysCompare(deps),
    'sessions.deploys.promote': deploysPromote(deps),
    'sessions.credentials.status': credentialsStatus(deps),
    'sessions.credentials.sealed': credentialsSealed(deps),
    'sessions.credentials.store': credentialsStore(deps),
    'sessions.public-keys.create': publicKeysCreate(deps),
    'sessions.public-keys.list': publicKeysList(deps),
    'sessions.public-keys.revoke': publicKeysRevoke(deps),
    'sessions.public-keys.verify': publicKeysVerify(deps),
    'sessions.live.page': livePage(deps),
  };
}

export interface SessionsService extends Served {
  retention: SessionRetention;
  callRetention: CallRetention;
  ownerSweep: OwnerSweep;
  /**
   * Every canary judged on a timer, deploys whose pipeline was interrupted (live/deploy-sweep.ts), and at the
   * start the backfill of what its indexes miss after an upgrade (its `backfill`).
   */
  deploySweep: DeploySweep;
  runner: TestRunner;
}

/** Test runs unless configured (sessions config: TEST_RUN_CONCURRENCY, TEST_CASE_TIMEOUT_MS, …). */
export const DEFAULT_RUNNER: RunnerSettings & { maxCases: number; maxRuns: number } = {
  concurrency: 4,
  caseTimeoutMs: 120_000,
  attempts: 2,
  heartbeatMs: 5_000,
  noInstanceRetryMs: 250,
  diffTimeoutMs: 5_000,
  maxCases: 200,
  maxRuns: 50,
};

/** Decision 0035's defaults (config: CANARY_STICKY_MS, CANARY_MIN_CALLS, CANARY_MAX_SLOWDOWN_MS). */
export interface CanarySettings {
  stickyMs: number;
  minCalls: number;
  maxSlowdownMs: number;
}
const DEFAULT_CANARY: CanarySettings = { stickyMs: 1_800_000, minCalls: 20, maxSlowdownMs: 300 };

export function startSessionsService(deps: {
  nc: NatsConnection;
  redis: RedisClient;
  log: Logger;
  writes?: WriteConcern;
  limits?: Partial<SessionsLimits> | undefined;
  retention?: RetentionSettings;
  /** Calls past their agent's retention (config: CALL_RETENTION_DAYS, RETENTION_SWEEP_INTERVAL_MS). */
  callRetention?: CallRetentionSettings;
  testRuns?: Partial<typeof DEFAULT_RUNNER>;
  /** Calls one address may hold at once (LIVE_MAX_CALLS_PER_ADDRESS; 0: no cap). */
  liveMaxCallsPerAddress?: number;
  /** How sessions whose playground instance is gone are found (config: OWNER_SWEEP_*). */
  ownerSweep?: { intervalMs: number; graceMs: number };
  /** The canary rule and stickiness (config: CANARY_*; decision 0035). */
  canary?: Partial<CanarySettings>;
  /** The readiness check's bound and the deploy sweep (config: DEPLOY_CHECK_TIMEOUT_MS, DEPLOY_SWEEP_*). */
  deploys?: Partial<typeof DEFAULT_DEPLOYS>;
}): SessionsService {
  const limits = { ...DEFAULT_LIMITS, ...deps.limits };
  const retentionDays = deps.retention?.testSessionDays ?? 0;
  // stats live as long as the sessions they count (a hash's TTL restarts with each write)
  const store = new SessionsStore(deps.redis, {
    limits,
    writes: deps.writes,
    statsTtlSeconds: retentionDays * 86_400,
  });
  const runs = { ...DEFAULT_RUNNER, ...deps.testRuns };
  const testing = new TestingStore(deps.redis, runs);
  const runner = new TestRunner(deps.nc, testing, runs, deps.log);
  runner.startSweeping();
  const liveDeploys = new LiveDeploys(deps.nc);
  const events = new DomainEvents(deps.nc, deps.log);
  const agents = new AgentsDirectory(deps.nc, limits.agentLookupTimeoutMs);
  const recordings = new Recordings(deps.nc, deps.log);
  const calls = new CallsStore(deps.redis, deps.liveMaxCallsPerAddress ?? 3);
  const canarySettings = { ...DEFAULT_CANARY, ...deps.canary };
  const { pipeline, canary, deploySweep } = startDeploys(deps, canarySettings, {
    store,
    testing,
    calls,
    liveDeploys,
    events,
    agents,
  });
  const handlerDeps: Deps = {
    store,
    testing,
    runner,
    pipeline,
    liveDeploys,
    events,
    analysisSettings: new AnalysisSettingsStore(deps.redis),
    analysisQueue: new AnalysisQueue(deps.nc),
    live: new LiveStore(deps.redis),
    calls,
    canary,
    canaryStickyMs: canarySettings.stickyMs,
    callLimits: { maxMessages: limits.maxMessagesPerSession },
    recordings,
    callErasure: new CallErasure(deps.nc, recordings, deps.log),
    agents,
    redis: deps.redis,
    statsMaxDays: retentionDays > 0 ? retentionDays : 366,
  };
  const served = serve(deps.nc, {
    service: 'sessions',
    handlers: sessionsHandlers(handlerDeps),
    log: deps.log,
    idempotency: idempotency(new RedisIdempotencyStore(deps.redis, 'ss:')),
  });
  const retention = new SessionRetention(
    store,
    deps.redis,
    deps.retention ?? { testSessionDays: 0, intervalMs: 3_600_000 },
    deps.log,
    recordings,
  );
  retention.start();
  const callRetention = startCallRetention(handlerDeps, deps.log, deps.callRetention);
  const ownerSweep = startOwnerSweep(deps, handlerDeps);
  return {
    ...served,
    retention,
    callRetention,
    ownerSweep,
    deploySweep,
    runner,
    stop: async (timeoutMs) => {
      await ownerSweep.stop();
      await deploySweep.stop();
      await retention.stop();
      await callRetention.stop();
      await runner.stop();
      await served.stop(timeoutMs);
      await pipeline.drain();
      await canary.drain();
    },
  };
}

/** The deploy pipeline, the canary judge, the deploy sweep and its backfill (live/*): what moves deploys. */
function startDeploys(
  deps: Parameters<typeof startSessionsService>[0],
  rule: CanarySettings,
  parts: Pick<Deps, 'store' | 'testing' | 'calls' | 'liveDeploys' | 'events' | 'agents'>,
) {
  const { store, testing, calls, liveDeploys, events, agents } = parts;
  const checkTimeoutMs = deps.deploys?.checkTimeoutMs ?? DEFAULT_DEPLOYS.checkTimeoutMs;
  // a check's bound given alone moves the interrupted deploys' bound with it (config.ts derives it so)
  const settings = {
    ...DEFAULT_DEPLOYS,
    checkTimeoutMs,
    interruptedAfterMs: interruptedAfterMsOf(checkTimeoutMs),
    ...deps.deploys,
  };
  const pipeline = new DeployPipeline(deps.nc, {
    store,
    testing,
    liveDeploys,
    events,
    agents,
    log: deps.log,
    checkTimeoutMs: settings.checkTimeoutMs,
  });
  const canary = new CanaryJudge({
    store,
    calls,
    pipeline,
    agents,
    liveDeploys,
    log: deps.log,
    rule,
  });
  const deploySweep = new DeploySweep(
    { store, calls, canary, pipeline, agents, liveDeploys, redis: deps.redis, log: deps.log },
    settings,
  );
  deploySweep.start();
  return { pipeline, canary, deploySweep };
}

/** Sessions and calls whose playground instance is gone are closed (and a call's end is told). */
function startOwnerSweep(deps: Parameters<typeof startSessionsService>[0], handlerDeps: Deps): OwnerSweep {
  const ownerSweep = new OwnerSweep(
    deps.nc,
    handlerDeps.store,
    deps.redis,
    {
      intervalMs: deps.ownerSweep?.intervalMs ?? 10_000,
      graceMs: deps.ownerSweep?.graceMs ?? 10_000,
      probeTimeoutMs: 1_000,
      batch: 500,
    },
    deps.log,
    Date.now,
    {
      store: handlerDeps.calls,
      ended: (call) => handlerDeps.events.publish(call.agentId, 'call.ended', { call }),
    },
    handlerDeps.recordings,
  );
  ownerSweep.start();
  return ownerSweep;
}

/** Calls past their agent's retention go, with their recordings and events (the operator's default: 30 days). */
function startCallRetention(
  deps: Deps,
  log: Logger,
  settings: CallRetentionSettings = { defaultDays: 30, intervalMs: 3_600_000 },
): CallRetention {
  const { calls, store, live, callErasure: erasure, events, redis } = deps;
  const retention = new CallRetention({ calls, store, live, erasure, events, redis, log }, settings);
  retention.start();
  return retention;
}
