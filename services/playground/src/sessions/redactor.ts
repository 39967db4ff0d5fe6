import { AppError, type ApiKeys } from '@vab/contracts';
import type { Logger } from 'pino';
import { KEY_ENV_VARS } from '../models/env-keys.js';
import type { KeyEnv } from '../models/provider-keys.js';

/** Shorter values are not replaced: a two-letter "key" would blank those letters in every text. */
export const MIN_SECRET_LENGTH = 6;
const CENSOR = '[redacted]';
/** Deeper than any event or result we build; what lies below is dropped rather than walked. */
const MAX_DEPTH = 32;

/**
 * Removes the exact credential values one session has in play (its request's `apiKeys` and media server
 * key/secret, the server's provider keys) from what leaves the process. Patterns (`redact` in figures.ts)
 * catch keys of known shapes; a provider that echoes a short key of no known shape is caught only here.
 * One per session, applied where a hosted session's output leaves: events, stored messages, turn answers,
 * errors, its logger.
 */
export class Redactor {
  private readonly values: readonly string[];

  constructor(values: Iterable<string | null | undefined>) {
    const set = new Set<string>();
    for (const v of values) {
      const t = v?.trim();
      if (t && t.length >= MIN_SECRET_LENGTH) set.add(t);
    }
    // longest first: a key that contains another is removed whole
    this.values = [...set].sort((a, b) => b.length - a.length);
  }

  get empty(): boolean {
    return this.values.length === 0;
  }

  text(s: string): string {
    let out = s;
    for (const v of this.values) if (out.includes(v)) out = out.replaceAll(v, CENSOR);
    return out;
  }

  /** A copy of `value` with every string in it redacted; the value itself when nothing needed it. */
  deep<T>(value: T): T {
    return this.empty ? value : (this.walk(value, 0) as T);
  }

  private walk(value: unknown, depth: number): unknown {
    if (typeof value === 'string') return this.text(value);
    if (value === null || typeof value !== 'object' || depth > MAX_DEPTH) return value;
    if (Array.isArray(value)) {
      let changed = false;
      const out = value.map((v) => {
        const w = this.walk(v, depth + 1);
        changed ||= w !== v;
        return w;
      });
      return changed ? out : value;
    }
    if (value instanceof Error) return new Error(this.text(value.message));
    let out: Record<string, unknown> | undefined;
    for (const [k, v] of Object.entries(value)) {
      const w = this.walk(v, depth + 1);
      if (w !== v) (out ??= { ...(value as Record<string, unknown>) })[k] = w;
    }
    return out ?? value;
  }

  /** A child logger whose every line's fields pass through this redactor. */
  logger(log: Logger, bindings: Record<string, unknown>): Logger {
    if (this.empty) return log.child(bindings);
    return log.child(bindings, {
      formatters: { log: (obj: object) => this.deep(obj) },
    });
  }
}

/**
 * The credentials one session has in play: the request's `apiKeys` and media server key/secret, and every
 * key variable of the server's environment (the URL is not a secret).
 */
export function sessionRedactor(
  env: KeyEnv,
  apiKeys: ApiKeys | null | undefined,
  extra: readonly (string | null | undefined)[] = [],
): Redactor {
  const server = KEY_ENV_VARS.filter((n) => n !== 'LIVEKIT_URL').map((n) => env[n]);
  return new Redactor([...Object.values(apiKeys ?? {}), ...server, ...extra]);
}

/** An API error as it may leave: its message and details without the session's credentials. */
export function redactedError(redactor: Redactor, err: AppError): AppError {
  if (redactor.empty) return err;
  const message = redactor.text(err.message);
  const details = redactor.deep(err.details);
  const issues = redactor.deep(err.issues);
  if (message === err.message && details === err.details && issues === err.issues) return err;
  return new AppError(err.code, message, {
    ...(issues ? { issues } : {}),
    ...(details !== undefined ? { details } : {}),
  });
}
