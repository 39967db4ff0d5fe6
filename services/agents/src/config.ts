import { envInt, LogLevel, parseEnv } from '@vab/bus';
import { z } from 'zod';

const Env = z.object({
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
  NATS_USER: z.string().optional(),
  NATS_PASS: z.string().optional(),
  REDIS_URL: z.string().min(1).default('redis://127.0.0.1:6379'),
  LOG_LEVEL: LogLevel,
  SHUTDOWN_TIMEOUT_MS: envInt(10_000, 100),
});

export type AgentsConfig = z.output<typeof Env>;

export function loadConfig(env: NodeJS.ProcessEnv): AgentsConfig {
  return parseEnv(Env, env);
}
