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
