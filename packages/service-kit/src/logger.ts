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

/** One HTTP request, as the access log records it. */
export interface AccessEntry {
  reqId: string;
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
  const tail = `","service":${JSON.stringify(service)},"name":${JSON.stringify(service)},"reqId":`;
  let lastMs = 0;
  let lastIso = '';
  return {
    request(e) {
      const now = Date.now();
      if (now !== lastMs) {
        lastMs = now;
        lastIso = new Date(now).toISOString();
      }
      destination.write(
        `${head}${lastIso}${tail}${JSON.stringify(e.reqId)},"method":${JSON.stringify(e.method)},` +
          `"url":${JSON.stringify(e.url)},"status":${e.status},"ms":${e.ms},"msg":"request completed"}\n`,
      );
    },
  };
}
