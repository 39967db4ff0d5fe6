import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths pino blanks wherever they appear in a log object. Credentials must never reach a log line, even
 * when a careless call logs a whole request body.
 */
export const REDACT_PATHS = [
  'apiKeys',
  '*.apiKeys',
  '*.*.apiKeys',
  'livekit.apiKey',
  'livekit.apiSecret',
  '*.livekit.apiKey',
  '*.livekit.apiSecret',
  '*.*.livekit.apiKey',
  '*.*.livekit.apiSecret',
  'authorization',
  '*.authorization',
  '*.headers.authorization',
  'password',
  '*.password',
];

export function createLogger(service: string, level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      name: service,
      level,
      base: { service },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/**
 * The gateway's one line per request. Its fields are fixed (method, route pattern, status, time, request
 * id) and never carry a credential, so it skips the redaction pass; and it is written in batches of 4 KB,
 * or every `ACCESS_LOG_FLUSH_MS` when traffic is light, instead of one write per request (pino writes what
 * is left on exit). Measured in docs/performance.md: one write per line was ~15 % of the gateway's CPU.
 */
export const ACCESS_LOG_FLUSH_MS = 200;

export function createAccessLogger(
  service: string,
  level: string,
  destination: pino.DestinationStream = pino.destination({
    dest: 1,
    sync: false,
    minLength: 4096,
    periodicFlush: ACCESS_LOG_FLUSH_MS,
  }),
): Logger {
  return pino(
    { name: service, level, base: { service }, timestamp: pino.stdTimeFunctions.isoTime },
    destination,
  );
}

/**
 * `log.child(bindings)` made only when something is logged. A child per request (the gateway's `req.log`,
 * a handler's `ctx.log`) costs a redaction pass and a serialization of its bindings even when the request
 * logs nothing, which most reads don't.
 */
export function lazyChild(log: Logger, bindings: pino.Bindings): Logger {
  let child: Logger | undefined;
  const made = () => (child ??= log.child(bindings));
  return new Proxy(log, {
    // Properties read from the parent until a method is called (Fastify checks the methods exist).
    get(target, prop) {
      const owner = child ?? target;
      const value: unknown = Reflect.get(owner, prop, owner);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const c = made();
        return (Reflect.get(c, prop, c) as (...a: unknown[]) => unknown).apply(c, args);
      };
    },
    set(_target, prop, value) {
      return Reflect.set(made(), prop, value);
    },
  });
}
