import { envInt, LogLevel, parseEnv } from '@vab/bus';
import { z } from 'zod';

const Env = z.object({
  HOST: z.string().default('127.0.0.1'),
  PORT: envInt(3000, 0),
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
  NATS_USER: z.string().optional(),
  NATS_PASS: z.string().optional(),
  LOG_LEVEL: LogLevel,
  /** Largest accepted request body; kept below the bus payload limit (checked at start). */
  BODY_LIMIT_BYTES: envInt(1024 * 1024, 1024),
  /** How long the gateway waits for a service's reply before answering 504. */
  REQUEST_TIMEOUT_MS: envInt(5000, 50),
  READY_TIMEOUT_MS: envInt(1000, 50),
  SHUTDOWN_TIMEOUT_MS: envInt(10_000, 100),
});

export type GatewayConfig = z.output<typeof Env>;

export function loadConfig(env: NodeJS.ProcessEnv): GatewayConfig {
  return parseEnv(Env, env);
}
