import { readFileSync } from 'node:fs';
import { parseAllowList, type AllowEntry } from '@vab/egress';
import {
  configProblem,
  envInt,
  envParsed,
  loadConfig as load,
  MetricsEnv,
  parseSealingKey,
  RedisEnv,
} from '@vab/service-kit';
import { z } from 'zod';

export type WebhooksConfig = ReturnType<typeof loadConfig>;

const keyList = (text: string | undefined) =>
  (text ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '')
    .map(parseSealingKey);

export function loadConfig(env: NodeJS.ProcessEnv) {
  const config = load(
    {
      ...RedisEnv,
      ...MetricsEnv,
      /** Seals the endpoints' signing secrets at rest (32 bytes: 64 hex digits or base64). */
      WEBHOOK_SECRETS_KEY: envParsed((t) => (t ? parseSealingKey(t) : undefined)),
      /** A file holding the key instead (a container secret); WEBHOOK_SECRETS_KEY wins when both are set. */
      WEBHOOK_SECRETS_KEY_FILE: z.string().min(1).optional(),
      /** Keys that sealed secrets before the current one (comma-separated): they still open, never seal. */
      WEBHOOK_SECRETS_OLD_KEYS: envParsed(keyList),
      /** Internal hosts and ranges a webhook URL may reach (as the playground's FLOW_EGRESS_ALLOW). */
      WEBHOOK_EGRESS_ALLOW: envParsed<AllowEntry[]>(parseAllowList),
      /** Bound on connecting, on the receiver's headers, and on its body's pauses. */
      WEBHOOK_TIMEOUT_MS: envInt(10_000, 100),
      /** Deliveries attempted at once by one instance. */
      WEBHOOK_CONCURRENCY: envInt(32, 1),
      /** The first retry's delay; each next one is 3× the last (±20 % jitter) up to the cap below. */
      WEBHOOK_RETRY_FIRST_MS: envInt(5_000, 1),
      WEBHOOK_RETRY_MAX_DELAY_MS: envInt(6 * 3_600_000, 1),
      /** Retries go on this long after the first attempt (timeouts, 5xx, 408, 429); then the delivery fails. */
      WEBHOOK_RETRY_FOR_MS: envInt(24 * 3_600_000, 1),
      /** Failed attempts in a row after which an endpoint is reported failing (event, metric, warning). */
      WEBHOOK_FAILING_AFTER: envInt(5, 1),
      /** Delivery records are kept this long, and the newest 1000 per endpoint at most. */
      WEBHOOK_DELIVERY_RETENTION_DAYS: envInt(30, 1),
      /** How often each instance looks for deliveries due for a retry. */
      WEBHOOK_POLL_MS: envInt(500, 10),
      /** The domain events stream's bounds (the service creates it when no publisher has yet). */
      DOMAIN_EVENTS_MAX_AGE_MS: envInt(7 * 86_400_000, 1000),
      DOMAIN_EVENTS_REPLICAS: envInt(1, 1),
    },
    env,
  );
  const key =
    config.WEBHOOK_SECRETS_KEY ??
    (config.WEBHOOK_SECRETS_KEY_FILE ? keyFromFile(config.WEBHOOK_SECRETS_KEY_FILE) : undefined);
  if (!key) throw configProblem('WEBHOOK_SECRETS_KEY', 'must be set (or WEBHOOK_SECRETS_KEY_FILE)');
  return Object.freeze({ ...config, secretsKey: key });
}

function keyFromFile(path: string): Buffer {
  try {
    return parseSealingKey(readFileSync(path, 'utf8'));
  } catch (err) {
    throw configProblem('WEBHOOK_SECRETS_KEY_FILE', `is unreadable or wrong: ${(err as Error).message}`);
  }
}
