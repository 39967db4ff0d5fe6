import { envInt, LogLevel, parseEnv } from '@vab/bus';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/** services/playground/{src,dist}/config.* → the repository root. */
const REPO_ROOT_ENV_FILE = fileURLToPath(new URL('../../../.env', import.meta.url));

/** Provider key variables whose presence GET /api/env-keys reports (never their values). */
export const PROVIDER_KEY_VARS = [
  'OPENAI_API_KEY',
  'ANTHROPIC_API_KEY',
  'ELEVEN_API_KEY',
  'ELEVENLABS_API_KEY',
  'DEEPGRAM_API_KEY',
  'GROQ_API_KEY',
  'LIVEKIT_URL',
  'LIVEKIT_API_KEY',
  'LIVEKIT_API_SECRET',
] as const;
export type ProviderKeyVar = (typeof PROVIDER_KEY_VARS)[number];

const Env = z.object({
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
  NATS_USER: z.string().optional(),
  NATS_PASS: z.string().optional(),
  LOG_LEVEL: LogLevel,
  /** Optional: Idempotency-Keys of session starts are kept here (shared by instances) instead of in memory. */
  REDIS_URL: z.string().optional(),
  SHUTDOWN_TIMEOUT_MS: envInt(10_000, 100),
  /** The server's local environment file, read afresh on each GET /api/env-keys (merged over the process env). */
  ENV_FILE: z.string().min(1).default(REPO_ROOT_ENV_FILE),
  /** Sessions this instance runs at once; past it, new ones answer 503. */
  MAX_SESSIONS: envInt(50, 1),
  /** A text session with no turn for this long is ended. */
  TEXT_SESSION_IDLE_MS: envInt(10 * 60_000, 1000),
  /** Bound on one branch evaluation or structured-output call to the model. */
  LLM_DECISION_TIMEOUT_MS: envInt(15_000, 100),
  WEBHOOK_TIMEOUT_MS: envInt(5000, 100),
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
  REAPER_INTERVAL_MS: envInt(60_000, 1000),
  /** A room whose owner is not alive is reaped once it is at least this old (spares rooms being created). */
  REAPER_MIN_AGE_MS: envInt(30_000, 0),
});

export type PlaygroundConfig = z.output<typeof Env> & {
  /** The provider key variables as the process environment had them at start. */
  providerEnv: Partial<Record<ProviderKeyVar, string>>;
};

export function loadConfig(env: NodeJS.ProcessEnv): PlaygroundConfig {
  const providerEnv: Partial<Record<ProviderKeyVar, string>> = {};
  for (const name of PROVIDER_KEY_VARS) {
    const v = env[name];
    if (v !== undefined) providerEnv[name] = v;
  }
  return { ...parseEnv(Env, env), providerEnv };
}
