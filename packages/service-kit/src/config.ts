import { z } from 'zod';
import { TracingEnv } from './tracing-env.js';

/** Environment values are strings; these coerce them with a readable error. */
export const envInt = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

/**
 * An optional variable parsed by `parse` (a list, a key, an allow list): a thrown error's message (which names
 * the bad entry, never the value) becomes the variable's problem, reported with the others at start.
 */
export const envParsed = <T>(parse: (text: string | undefined) => T) =>
  z
    .string()
    .optional()
    .transform((text, ctx) => {
      try {
        return parse(text);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    });

const LogLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info');

/** What every service reads: where the bus is and who it is there, how it logs, how long it may take to stop. */
export const BaseEnv = z.object({
  /** One server, or several comma-separated (a cluster): the client moves to another when one goes. */
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
  NATS_USER: z.string().optional(),
  NATS_PASS: z.string().optional(),
  LOG_LEVEL: LogLevel,
  /** Bound on a graceful stop; the process exits after it regardless. */
  SHUTDOWN_TIMEOUT_MS: envInt(10_000, 100),
  /**
   * Set by `npm start`'s supervisor only (a random id per run): the process stops at once when the
   * supervisor's IPC channel closes, and the gateway's `/readyz` names the stack, so the supervisor never takes
   * another program on its port for its own gateway.
   */
  STACK_ID: z.string().min(1).optional(),
  /** The standard OpenTelemetry variables (tracing-env.ts): traces are off unless an OTLP endpoint is set. */
  ...TracingEnv,
});
export type BaseConfig = z.output<typeof BaseEnv>;

/** For a service that stores data. */
export const RedisEnv = {
  REDIS_URL: z.string().min(1).default('redis://127.0.0.1:6379'),
  /** Seed nodes of a Redis Cluster (`host:port,host:port,…`); set, it wins over REDIS_URL. */
  REDIS_CLUSTER_NODES: z
    .string()
    .regex(/^(\s*[^\s,:]+:\d{1,5}\s*(,\s*[^\s,:]+:\d{1,5}\s*)*)?$/, 'expected host:port,host:port,…')
    .optional(),
  /** The cluster's password (`requirepass`/`masterauth`), when it has one; REDIS_URL carries its own. */
  REDIS_CLUSTER_PASSWORD: z.string().optional(),
  /** Replicas that must hold a write before it is answered (Redis WAIT); 0 = do not wait. */
  REDIS_WAIT_REPLICAS: envInt(0),
  /** How long a write waits for those replicas before it answers 503. */
  REDIS_WAIT_TIMEOUT_MS: envInt(500, 1),
};
export type RedisConfig = z.output<z.ZodObject<typeof RedisEnv>>;

/**
 * A service's configuration: the base schema extended by `shape`, parsed from the environment once, failing
 * fast and naming each bad variable, and frozen. Only `config.ts` files call this; nothing else reads
 * `process.env`.
 */
export function loadConfig<S extends z.ZodRawShape>(
  shape: S,
  env: NodeJS.ProcessEnv,
): Readonly<z.output<ReturnType<typeof BaseEnv.extend<S>>>> {
  const result = BaseEnv.extend(shape).safeParse(env);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((i) => problemText(i.path.join('.'), i.message)).join('; '),
    );
  }
  return Object.freeze(result.data);
}

/** A setting that is wrong: the message names the variable and what is wrong with it, on one line. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(problems: string) {
    super(`invalid configuration: ${problems}`);
  }
}

/** `UPSTREAM_URL must be an http(s) URL`, `PORT: Invalid input: …` */
const problemText = (variable: string, message: string) =>
  /^(must|is) /.test(message) ? `${variable} ${message}` : `${variable}: ${message}`;

/** Refuses a configuration with one problem, named as `loadConfig` names them. */
export const configProblem = (variable: string, message: string): ConfigError =>
  new ConfigError(problemText(variable, message));

/**
 * A service's main reads its configuration through this: a bad setting stops the process with one line on
 * stderr naming the variable and what is wrong, and exit code 1 (no stack: nothing there is the code's fault).
 */
export function configOrExit<T>(service: string, load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${service}: ${err.message}\n`);
    process.exit(1);
  }
}
