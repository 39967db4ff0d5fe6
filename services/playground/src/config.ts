import { configProblem, envInt, envParsed, loadConfig as load, MetricsEnv, RedisEnv } from '@vab/service-kit';
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { readFileSync } from 'node:fs';
import { parseSealingKey } from './live/sealing.js';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { parseAllowList, type AllowEntry } from './egress/policy.js';
import { keyVarsOf } from './models/env-keys.js';
import { parseTrustedUrls } from './models/provider-keys.js';

/** services/playground/{src,dist}/config.* → the repository root. */
const REPO_ROOT_ENV_FILE = fileURLToPath(new URL('../../../.env', import.meta.url));

const Env = {
  ...MetricsEnv,
  /** Optional: Idempotency-Keys of session starts are kept here (shared by instances) instead of in memory. */
  REDIS_URL: z.string().optional(),
  /** The same on a Redis Cluster (seed `host:port,…`), as the storing services take it; wins over REDIS_URL. */
  REDIS_CLUSTER_NODES: RedisEnv.REDIS_CLUSTER_NODES,
  REDIS_CLUSTER_PASSWORD: RedisEnv.REDIS_CLUSTER_PASSWORD,
  /** The server's local environment file, read afresh on each GET /api/env-keys (merged over the process env). */
  ENV_FILE: z.string().min(1).default(REPO_ROOT_ENV_FILE),
  /**
   * Worker threads the process runs its sessions on (decision 0037), each a playground instance of its own
   * (`<INSTANCE_ID>-t<i>`: its own event loop, heap, collector, NATS connection, queue-group membership and
   * load-based admission) under a main thread that owns the signals, the ops port and the logs. `1`: the
   * process is one instance on its main thread, as before threads; `auto`: one per CPU the process may use.
   */
  PLAYGROUND_THREADS: z
    .union([z.literal('auto'), z.coerce.number().int().min(1).max(64)])
    .default(1)
    .transform((v) => (v === 'auto' ? Math.min(64, availableParallelism()) : v)),
  /**
   * Sessions this process runs at once; past it, new ones answer 503 CAPACITY_EXHAUSTED. With threads, each
   * takes its share (they add up to this).
   */
  MAX_SESSIONS: envInt(50, 1),
  /**
   * Sessions one caller (the gateway's caller: a token's identity, else an address) may hold at once, across
   * every playground instance; past it a start answers 429. 0: no quota.
   */
  MAX_SESSIONS_PER_CALLER: envInt(10, 0),
  /** A caller's slot (the quota's count across instances) outlives a crashed instance by at most this. */
  CALLER_SLOT_LEASE_MS: envInt(30_000, 1000),
  /** A text session with no turn for this long is ended. */
  TEXT_SESSION_IDLE_MS: envInt(10 * 60_000, 1000),
  /** Bound on one branch evaluation or structured-output call to the model. */
  LLM_DECISION_TIMEOUT_MS: envInt(15_000, 100),
  WEBHOOK_TIMEOUT_MS: envInt(5000, 100),
  /**
   * Calls analysed at once by one process (post-call analysis, issue 47), its threads' shares adding up to it;
   * 0: it analyses none.
   */
  ANALYSIS_CONCURRENCY: envInt(8, 0),
  /**
   * A job taken and not acknowledged within this long (its instance died) goes to another instance; it must
   * exceed one analysis (its model calls run in parallel, each bounded by LLM_DECISION_TIMEOUT_MS). Set when
   * the queue's consumer is first made.
   */
  ANALYSIS_ACK_WAIT_MS: envInt(60_000, 1000),
  /** Bound on connecting to an MCP server, listing its tools, and each tool call. */
  MCP_TIMEOUT_MS: envInt(10_000, 100),
  /**
   * Internal addresses flows may still reach (webhooks, model base URLs, MCP servers): comma-separated
   * host names, addresses and CIDR ranges. Unset: none.
   */
  FLOW_EGRESS_ALLOW: envParsed<AllowEntry[]>(parseAllowList),
  /** Base URLs (e.g. a self-hosted model gateway) a flow may point a model at with the server's own keys. */
  TRUSTED_MODEL_URLS: envParsed<URL[]>(parseTrustedUrls),
  /** Bound on connecting to a URL a flow names, on its answer's headers, and on any pause in its body. */
  FLOW_EGRESS_TIMEOUT_MS: envInt(30_000, 100),
  /** An answer from a URL a flow names is cut off past this many bytes. */
  FLOW_EGRESS_MAX_RESPONSE_BYTES: envInt(4 * 1024 * 1024, 1024),
  /** Bound on requests to the agents and sessions services. */
  BUS_TIMEOUT_MS: envInt(5000, 50),
  /** Names this instance in room metadata and to the reaper; unique per process by default. */
  INSTANCE_ID: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/)
    .default(() => `pg-${process.pid}-${randomBytes(4).toString('hex')}`),
  /** The agent must have joined the room within this, or the room is deleted and the create answers 502. */
  AGENT_JOIN_TIMEOUT_MS: envInt(10_000, 100),
  MEDIA_SERVER_TIMEOUT_MS: envInt(5000, 100),
  USER_TOKEN_TTL_S: envInt(600, 30),
  ROOM_EMPTY_TIMEOUT_S: envInt(60, 1),
  ROOM_DEPARTURE_TIMEOUT_S: envInt(20, 1),
  /** After the last user leaves, the session stops unless someone rejoins within this. */
  USER_LEFT_GRACE_MS: envInt(15_000, 0),
  MAX_SESSION_MS: envInt(30 * 60_000, 1000),
  /** A voice session whose client has not opened its audio socket within this is ended. */
  VOICE_CONNECT_TIMEOUT_MS: envInt(15_000, 100),
  /** No audio from a voice client for this long (it sends silence, not nothing): it is gone, the session ends. */
  VOICE_INPUT_IDLE_MS: envInt(5000, 100),
  /**
   * A voice client whose gateway died (its relay stopped answering) may resume on another gateway within this;
   * the session waits, silent, then ends `gateway_lost` (docs/api.md › Resuming).
   */
  VOICE_RESUME_WINDOW_MS: envInt(15_000, 0),
  /** How often a voice session's owner asks its relay whether it is there (two misses in a row: it is gone). */
  VOICE_RELAY_CHECK_MS: envInt(1000, 50),
  /** How long the agent waits for a client's playback report beyond the audio's own length. */
  VOICE_PLAYBACK_ACK_GRACE_MS: envInt(2000, 50),
  /** A simulated voice caller waits this long for the agent to answer before it goes on (a silent agent). */
  VOICE_SIM_ANSWER_TIMEOUT_MS: envInt(15_000, 500),
  /** The agent quiet this long (its audio played out) ends its turn for a simulated voice caller. */
  VOICE_SIM_SETTLE_MS: envInt(1000, 100),
  REAPER_INTERVAL_MS: envInt(60_000, 1000),
  /** A room whose owner is not alive is reaped once it is at least this old (spares rooms being created). */
  REAPER_MIN_AGE_MS: envInt(30_000, 0),
  /** Session events are kept this long in the JetStream stream (as long as test sessions: 30 days). */
  EVENTS_MAX_AGE_MS: envInt(30 * 86_400_000, 60_000),
  /** The events stream's size bound, in bytes; past it the oldest events go. */
  EVENTS_MAX_BYTES: envInt(1024 * 1024 * 1024, 1024 * 1024),
  /** Copies of the events stream on a JetStream cluster (1, 3 or 5). */
  EVENTS_REPLICAS: envInt(1, 1),
  /** How long start-up waits for JetStream to take the events stream (a new cluster elects a leader first). */
  EVENTS_SETUP_TIMEOUT_MS: envInt(30_000, 1000),
  /** `off`: no voice session is recorded (a start may also opt out with `record: false`). */
  RECORDINGS: z.enum(['on', 'off']).default('on'),
  /** Recordings are kept this long in their Object Store bucket (as long as test sessions: 30 days). */
  RECORDINGS_MAX_AGE_MS: envInt(30 * 86_400_000, 60_000),
  /** The recordings bucket's size bound, in bytes; a recording that does not fit is not stored (logged). */
  RECORDINGS_MAX_BYTES: envInt(2 * 1024 * 1024 * 1024, 1024 * 1024),
  /** Copies of the recordings bucket on a JetStream cluster (1, 3 or 5). */
  RECORDINGS_REPLICAS: envInt(1, 1),
  /**
   * How often a recording being made is written to its bucket (its complete Ogg pages so far): what a killed
   * instance loses of it is at most about this plus the recorder's 2.5 s settle (decision 35).
   */
  RECORDING_FLUSH_MS: envInt(2000, 200),
  /**
   * How long a recording keeps trying a bucket that refuses its writes (backing off from RECORDING_FLUSH_MS)
   * before it stops writing until its call ends; nothing is lost meanwhile (the spooled file holds it), and the
   * call's end tries once more.
   */
  RECORDING_FLUSH_RETRY_MS: envInt(60_000, 0),
  /** How often this instance measures its load (event-loop delay, sessions behind real time, CPU). */
  LOAD_CHECK_INTERVAL_MS: envInt(1000, 100),
  /**
   * Past any of these the instance takes no new session (it leaves the start subjects' queue groups; a start
   * that still reaches it answers 503 with Retry-After) until every measure stays under its threshold for
   * LOAD_RECOVER_MS. 0 turns one off. Event-loop delay p99 over one interval, in ms:
   */
  LOAD_MAX_EVENT_LOOP_P99_MS: envInt(100, 0),
  /** …the worst voice session's audio this far behind real time (its VAD's queue), in ms: */
  LOAD_MAX_BEHIND_MS: envInt(500, 0),
  /**
   * …the process's CPU, in percent of one core (a thread runs its sessions on one; with PLAYGROUND_THREADS, each
   * thread compares the process's CPU with this times the threads, as its own is not measured apart):
   */
  LOAD_MAX_CPU_PERCENT: envInt(90, 0),
  /** …each of them past its threshold in every interval for this long (a burst or a start-up is not load): */
  LOAD_OVER_FOR_MS: envInt(3000, 0),
  LOAD_RECOVER_MS: envInt(5000, 0),
  /** An admitted voice session whose audio falls this far behind real time is ended (`behind real time`). 0: never. */
  SESSION_MAX_BEHIND_MS: envInt(3000, 0),
  /**
   * SIGTERM (a rolling update): the instance takes no new session at once, and lets its sessions finish for up
   * to this long; those still running then hear the goodbye and end (`session_ended` reason `drained`). 0: they
   * end at once. SHUTDOWN_TIMEOUT_MS must leave room for it and the goodbye (checked at start).
   */
  DRAIN_TIMEOUT_MS: envInt(0, 0),
  /** What a drained voice session's agent says before it ends, when its flow's agent sets no `drainGoodbye`. */
  DRAIN_GOODBYE: z
    .string()
    .max(500)
    .default(
      "I'm sorry, I have to end this call now for a moment of maintenance. Please call again. Goodbye.",
    ),
  /** Bound on a drained voice session's goodbye (its speech and playout); 0: none is said. */
  DRAIN_GOODBYE_MS: envInt(5000, 0),
  /**
   * Issue 45: the operator's key that seals the agents' stored provider credentials (AES-256-GCM): 32 bytes as
   * 64 hex digits or base64. Unset (and no CREDENTIALS_KEY_FILE): credentials cannot be stored, and calls run
   * with the server's keys only.
   */
  CREDENTIALS_KEY: z
    .string()
    .refine((v) => parseSealingKey(v) !== null, 'must be 32 bytes: 64 hex digits or base64')
    .optional(),
  /** The same key read from a file (a mounted secret); CREDENTIALS_KEY wins when both are set. */
  CREDENTIALS_KEY_FILE: z
    .string()
    .optional()
    .transform((path, ctx) => {
      if (!path) return undefined;
      try {
        const text = readFileSync(path, 'utf8').trim();
        if (parseSealingKey(text) === null) throw new Error('must hold 32 bytes: 64 hex digits or base64');
        return text;
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    }),
  /** Rotation: the keys credentials were sealed with before (comma-separated); they open, never seal. */
  CREDENTIALS_OLD_KEYS: z
    .string()
    .optional()
    .refine(
      (v) => !v || v.split(',').every((k) => parseSealingKey(k.trim()) !== null),
      'each must be 32 bytes: 64 hex digits or base64',
    ),
  /** How long the reaper listens for the other instances saying they are alive. */
  REAPER_ALIVE_WAIT_MS: envInt(500, 10),
};

export type PlaygroundConfig = ReturnType<typeof load<typeof Env>> & {
  /** The provider key variables as the process environment had them at start. */
  providerEnv: Readonly<Record<string, string>>;
};

export function loadConfig(env: NodeJS.ProcessEnv): Readonly<PlaygroundConfig> {
  const config = load(Env, env);
  if (config.PLAYGROUND_THREADS > config.MAX_SESSIONS) {
    throw configProblem(
      'PLAYGROUND_THREADS',
      `must not exceed MAX_SESSIONS (${config.MAX_SESSIONS}): each thread takes at least one session`,
    );
  }
  if (config.PLAYGROUND_THREADS > 1 && config.INSTANCE_ID.length > 60) {
    throw configProblem(
      'INSTANCE_ID',
      'must be at most 60 characters with PLAYGROUND_THREADS above 1 (each thread is `<INSTANCE_ID>-t<i>`)',
    );
  }
  // the drain and its goodbyes run inside the shutdown's bound, with a second for the rest of the stop
  const drainMs = config.DRAIN_TIMEOUT_MS + config.DRAIN_GOODBYE_MS + 1000;
  if (config.DRAIN_TIMEOUT_MS > 0 && drainMs >= config.SHUTDOWN_TIMEOUT_MS) {
    throw configProblem(
      'DRAIN_TIMEOUT_MS',
      `must leave room in SHUTDOWN_TIMEOUT_MS (${config.SHUTDOWN_TIMEOUT_MS}) for DRAIN_GOODBYE_MS and a second: set SHUTDOWN_TIMEOUT_MS above ${drainMs}`,
    );
  }
  return Object.freeze({ ...config, providerEnv: Object.freeze(keyVarsOf(env)) });
}
