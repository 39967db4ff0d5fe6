import { context, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths pino blanks wherever they appear in a log object. Credentials must never reach a log line, even
 * when a careless call logs a whole request body.
 */
const REDACT_PATHS = [
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

/**
 * The trace a line was written in, on every line of every service (the W3C ids, as OpenTelemetry's log
 * data model names them): read from the active context, so it is there while a traced request is served,
 * with or without an exporter.
 */
export function traceFields(): Record<string, string> {
  const active = context.active();
  // outside any trace (most lines, and every untraced request's access line): nothing to look up
  if (active === ROOT_CONTEXT) return {};
  const sc = trace.getSpanContext(active);
  // a new object each time: pino merges the line's own fields into it
  if (!sc || sc.traceId === INVALID_TRACE_ID) return {};
  return { trace_id: sc.traceId, span_id: sc.spanId, trace_flags: sc.traceFlags === 1 ? '01' : '00' };
}
const INVALID_TRACE_ID = '00000000000000000000000000000000';

/**
 * What a logger made for another library adds to the stack's format (LiveKit Agents' logger, in the
 * playground): fields of its own, fields read per line (the session a line was written in), and how an error
 * is written.
 */
export interface LoggerExtras {
  base?: Record<string, string>;
  fields?: () => Record<string, unknown>;
  serializers?: Record<string, (value: unknown) => unknown>;
  /** Fields whose name matches are dropped from every line (what the library marks as personal data). */
  dropFields?: RegExp;
}

const dropping =
  (names: RegExp) =>
  (obj: Record<string, unknown>): Record<string, unknown> => {
    let kept: Record<string, unknown> | undefined;
    for (const key of Object.keys(obj)) {
      if (!names.test(key)) continue;
      kept ??= { ...obj };
      delete kept[key];
    }
    return kept ?? obj;
  };

function droppingInChildren(logger: Logger, names: RegExp): Logger {
  const child = logger.child.bind(logger);
  logger.child = ((bindings: pino.Bindings, options?: pino.ChildLoggerOptions) =>
    droppingInChildren(child(dropping(names)(bindings), options), names)) as unknown as Logger['child'];
  return logger;
}

export function createLogger(
  service: string,
  level: string,
  destination?: pino.DestinationStream,
  extras: LoggerExtras = {},
): Logger {
  const { fields } = extras;
  const logger = pino(
    {
      name: service,
      level,
      base: { service, ...extras.base },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      mixin: fields ? () => ({ ...fields(), ...traceFields() }) : traceFields,
      ...(extras.serializers ? { serializers: extras.serializers } : {}),
      ...(extras.dropFields ? { formatters: { log: dropping(extras.dropFields) } } : {}),
    },
    destination,
  );
  // a child's bindings are no line's fields: they are dropped when the child is made (LiveKit binds them so)
  return extras.dropFields ? droppingInChildren(logger, extras.dropFields) : logger;
}

/**
 * An error as one line: its type, message and code, without the stack trace (a library that logs whole
 * errors would otherwise write a dozen lines of frames per model failure).
 */
export function briefError(value: unknown): unknown {
  if (!(value instanceof Error)) return value;
  const code = (value as { code?: unknown }).code;
  return { type: value.name, message: value.message, ...(code !== undefined ? { code } : {}) };
}

/** One HTTP request, as the access log records it. */
export interface AccessEntry {
  /** The one name for a request's id on every line of every service. */
  requestId: string;
  method: string;
  /** The route pattern (`/api/agents/:id`), or the path when no route matched. */
  url: string;
  status: number;
  ms: number;
}

export interface AccessLog {
  request(entry: AccessEntry): void;
}

const ACCESS_LOG_FLUSH_MS = 200;

/**
 * The gateway's one line per request, in the same JSON shape as the pino lines around it. It is built
 * directly rather than through pino (its fields are fixed and never carry a credential, so there is
 * nothing to redact), the timestamp string is reused within a millisecond, and lines are written in
 * batches of 4 KB, or every `ACCESS_LOG_FLUSH_MS` when traffic is light (what is left is written on exit).
 * Through pino, one write per line, it was the gateway's largest cost (docs/performance.md).
 */
export function createAccessLog(
  service: string,
  level: string,
  to?: { write(line: string): unknown },
): AccessLog {
  if (pino.levels.values[level] === undefined && level !== 'silent') {
    throw new Error(`unknown log level ${level}`);
  }
  if (level === 'silent' || pino.levels.values[level]! > pino.levels.values.info!) {
    return { request: () => undefined };
  }
  // made only when lines will be written: it holds a flush timer
  const destination =
    to ?? pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: ACCESS_LOG_FLUSH_MS });
  const head = `{"level":30,"time":"`;
  const tail = `","service":${JSON.stringify(service)},"name":${JSON.stringify(service)},"requestId":`;
  let lastMs = 0;
  let lastIso = '';
  return {
    request(e) {
      const now = Date.now();
      if (now !== lastMs) {
        lastMs = now;
        lastIso = new Date(now).toISOString();
      }
      const t = traceFields();
      // ids are hex: nothing to escape
      const traced =
        t.trace_id === undefined
          ? ''
          : `,"trace_id":"${t.trace_id}","span_id":"${t.span_id}","trace_flags":"${t.trace_flags}"`;
      destination.write(
        `${head}${lastIso}${tail}${JSON.stringify(e.requestId)},"method":${JSON.stringify(e.method)},` +
          `"url":${JSON.stringify(e.url)},"status":${e.status},"ms":${e.ms}${traced},"msg":"request completed"}\n`,
      );
    },
  };
}
