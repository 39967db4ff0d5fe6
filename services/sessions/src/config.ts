import { envInt, loadConfig as load, MetricsEnv, RedisEnv } from '@vab/service-kit';
import { z } from 'zod';

const Env = {
  ...RedisEnv,
  ...MetricsEnv,
  /** How long to wait for the agents service when checking that an agent exists. */
  AGENT_LOOKUP_TIMEOUT_MS: envInt(2000, 50),
  MAX_MESSAGE_CHARS: envInt(16_000, 1),
  MAX_MESSAGES_PER_SESSION: envInt(20_000, 1),
  MAX_CONVERSATION_CONTENT_CHARS: envInt(32_000, 1),
  MAX_OPERATIONS_PER_ENTRY: envInt(200, 0),
  MAX_ATTACHMENTS_PER_ENTRY: envInt(100, 0),
  /** A whole builder-chat entry as stored (content, operations, attachments), in bytes of JSON. */
  MAX_CONVERSATION_ENTRY_BYTES: envInt(256 * 1024, 1024),
  /** Builder-chat entries kept per agent: beyond it the oldest go. */
  MAX_CONVERSATION_ENTRIES: envInt(5_000, 1),
  /** Test sessions (with their messages) are deleted this many days after they started; 0 = kept forever. */
  TEST_SESSION_RETENTION_DAYS: envInt(30, 0),
  /** Test cases per agent. */
  MAX_TEST_CASES_PER_AGENT: envInt(200, 1),
  /** Test runs kept per agent (oldest go). */
  MAX_TEST_RUNS_PER_AGENT: envInt(50, 1),
  /** Cases of one test run in flight at once (spread over playground instances by the bus). */
  TEST_RUN_CONCURRENCY: envInt(4, 1),
  /** How long one case may run on a playground instance before it counts as lost and is started again. */
  TEST_CASE_TIMEOUT_MS: envInt(120_000, 1000),
  /** How often an attempt whose instance was lost (TEST_CASE_TIMEOUT_MS) is started again: its retries. */
  TEST_CASE_RETRIES: envInt(1, 0),
  /** Renamed (an attempt is one repeat of a case; a start again is a retry): a setting of it stops the start. */
  TEST_CASE_ATTEMPTS: z
    .undefined({ error: 'is now TEST_CASE_RETRIES: the starts after the first (TEST_CASE_ATTEMPTS − 1)' })
    .optional(),
  /** How often the instance driving a run says so; a run unheard of for 3× this is errored. */
  TEST_RUN_HEARTBEAT_MS: envInt(5_000, 100),
  /**
   * How often one instance (a lock picks it) checks open test sessions for a playground instance that still
   * holds them; one whose owner is gone is closed within about twice this (after `OWNER_SWEEP_GRACE_MS`).
   */
  OWNER_SWEEP_INTERVAL_MS: envInt(10_000, 100),
  /** A session younger than this is not checked (its owner subscribes just after creating it). */
  OWNER_SWEEP_GRACE_MS: envInt(10_000, 0),
  /** Calls one caller's address (IPv4, IPv6 /64) may hold at once, across agents; 0: no cap (issue 45). */
  LIVE_MAX_CALLS_PER_ADDRESS: envInt(3, 0),
  /**
   * Days a call (its transcript, recording and events) is kept when its agent's `callRetentionDays` is null;
   * 0: kept forever (issue 45).
   */
  CALL_RETENTION_DAYS: envInt(30, 0),
  /** Decision 0035: how long a caller keeps the side (canary or live) of a running canary it was drawn on. */
  CANARY_STICKY_MS: envInt(1_800_000, 1000),
  /** Decision 0035: judged (or timed) calls each side of a canary needs before the canary rule may fire. */
  CANARY_MIN_CALLS: envInt(20, 1),
  /** Decision 0035: how much slower (median response, ms) a canary may be than the live deploy. */
  CANARY_MAX_SLOWDOWN_MS: envInt(300, 0),
  /** How often one instance (a lock picks it) sweeps for test sessions (and calls) past their retention. */
  RETENTION_SWEEP_INTERVAL_MS: envInt(3_600_000, 1000),
  /** How long the deploy pipeline waits for the readiness check of a deploy's version (the playground's). */
  DEPLOY_CHECK_TIMEOUT_MS: envInt(30_000, 1000),
  /**
   * How often one instance (a lock picks it) promotes canaries whose window is over and fails deploys whose
   * pipeline was interrupted (its instance died): what no instance's memory may be trusted with.
   */
  DEPLOY_SWEEP_INTERVAL_MS: envInt(15_000, 100),
};

export type SessionsConfig = ReturnType<typeof loadConfig>;

export interface SessionsLimits {
  maxMessageChars: number;
  maxMessagesPerSession: number;
  maxConversationContentChars: number;
  maxOperationsPerEntry: number;
  maxAttachmentsPerEntry: number;
  maxConversationEntryBytes: number;
  maxConversationEntries: number;
  agentLookupTimeoutMs: number;
}

export function loadConfig(env: NodeJS.ProcessEnv) {
  return load(Env, env);
}

export function limitsFrom(config: SessionsConfig): SessionsLimits {
  return {
    maxMessageChars: config.MAX_MESSAGE_CHARS,
    maxMessagesPerSession: config.MAX_MESSAGES_PER_SESSION,
    maxConversationContentChars: config.MAX_CONVERSATION_CONTENT_CHARS,
    maxOperationsPerEntry: config.MAX_OPERATIONS_PER_ENTRY,
    maxAttachmentsPerEntry: config.MAX_ATTACHMENTS_PER_ENTRY,
    maxConversationEntryBytes: config.MAX_CONVERSATION_ENTRY_BYTES,
    maxConversationEntries: config.MAX_CONVERSATION_ENTRIES,
    agentLookupTimeoutMs: config.AGENT_LOOKUP_TIMEOUT_MS,
  };
}

export function testRunsFrom(config: SessionsConfig) {
  return {
    concurrency: config.TEST_RUN_CONCURRENCY,
    caseTimeoutMs: config.TEST_CASE_TIMEOUT_MS,
    attempts: 1 + config.TEST_CASE_RETRIES,
    heartbeatMs: config.TEST_RUN_HEARTBEAT_MS,
    maxCases: config.MAX_TEST_CASES_PER_AGENT,
    maxRuns: config.MAX_TEST_RUNS_PER_AGENT,
  };
}

export function ownerSweepFrom(config: SessionsConfig) {
  return { intervalMs: config.OWNER_SWEEP_INTERVAL_MS, graceMs: config.OWNER_SWEEP_GRACE_MS };
}

export const DEFAULT_LIMITS: SessionsLimits = limitsFrom(loadConfig({}));

/**
 * The deploy sweep (live/deploy-sweep.ts): a deploy still `pending` or `building` this long after it was made
 * has lost its pipeline (a pipeline ends within the readiness check's bound; the margin covers the gate's
 * and the store's round trips on a loaded machine).
 */
export const DEPLOY_INTERRUPTED_MARGIN_MS = 30_000;

/** How long after its creation a pipeline deploy still pending/building counts as interrupted. */
export const interruptedAfterMsOf = (checkTimeoutMs: number) => checkTimeoutMs + DEPLOY_INTERRUPTED_MARGIN_MS;

export function deploySweepFrom(config: SessionsConfig) {
  return {
    intervalMs: config.DEPLOY_SWEEP_INTERVAL_MS,
    checkTimeoutMs: config.DEPLOY_CHECK_TIMEOUT_MS,
    interruptedAfterMs: interruptedAfterMsOf(config.DEPLOY_CHECK_TIMEOUT_MS),
  };
}

/** The deploy pipeline's bounds and sweep unless configured (DEPLOY_CHECK_TIMEOUT_MS, DEPLOY_SWEEP_INTERVAL_MS). */
export const DEFAULT_DEPLOYS = deploySweepFrom(loadConfig({}));

export function canaryFrom(config: SessionsConfig) {
  return {
    stickyMs: config.CANARY_STICKY_MS,
    minCalls: config.CANARY_MIN_CALLS,
    maxSlowdownMs: config.CANARY_MAX_SLOWDOWN_MS,
  };
}
