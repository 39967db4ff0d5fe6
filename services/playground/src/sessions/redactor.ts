import { AppError, type ApiKeys } from '@vab/contracts';
import type { DestinationStream, Logger } from 'pino';
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

  /** The values it removes (each at least `MIN_SECRET_LENGTH` long). */
  get secrets(): readonly string[] {
    return this.values;
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
  return new Redactor([...Object.values(apiKeys ?? {}), ...serverSecrets(env), ...extra]);
}

/** The server's credentials in an environment: every key variable but the media server's URL. */
export const serverSecrets = (env: KeyEnv): (string | undefined)[] =>
  KEY_ENV_VARS.filter((n) => n !== 'LIVEKIT_URL').map((n) => env[n]);

/**
 * How long a session's values stay in play after it stopped: LiveKit's tasks of a session can still log a
 * failed request (a recognition under way when it closed) after the session is gone.
 */
const AFTER_STOP_MS = 60_000;

/**
 * The exact credential values in play in this process: every hosted session's (from its start until a while
 * after it stopped) and the server's keys (every one it was configured with). What the process's log
 * destination removes from each line, whoever wrote it — LiveKit's logger, a library's, ours — and in
 * whatever context: a session's own redactor only sees what passes through that session's objects.
 */
export class SecretsInPlay {
  /** Each value, and how many holders have it in play. */
  private readonly held = new Map<string, number>();
  private readonly server = new Set<string>();
  private redactor = new Redactor([]);

  /** Puts a session's values in play; the function it returns takes them out (`AFTER_STOP_MS` later). */
  hold(session: Redactor): () => void {
    const values = session.secrets;
    if (values.length === 0) return () => undefined;
    for (const v of values) this.held.set(v, (this.held.get(v) ?? 0) + 1);
    this.rebuild();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      setTimeout(() => {
        for (const v of values) {
          const n = (this.held.get(v) ?? 1) - 1;
          if (n > 0) this.held.set(v, n);
          else this.held.delete(v);
        }
        this.rebuild();
      }, AFTER_STOP_MS).unref();
    };
  }

  /** The server's keys as the environment has them now; a key it had before stays in play (rotated out). */
  serverKeys(env: KeyEnv): void {
    const before = this.server.size;
    for (const v of serverSecrets(env)) {
      const t = v?.trim();
      if (t && t.length >= MIN_SECRET_LENGTH) this.server.add(t);
    }
    if (this.server.size !== before) this.rebuild();
  }

  /** `line` with every value in play replaced, as written (a log line is JSON: its escaped form too). */
  text(line: string): string {
    return this.redactor.text(line);
  }

  private rebuild(): void {
    const values = new Set<string>();
    for (const v of [...this.held.keys(), ...this.server]) {
      values.add(v);
      values.add(JSON.stringify(v).slice(1, -1));
    }
    this.redactor = new Redactor(values);
  }
}

/** This process's values in play (one log destination for the whole process reads them). */
export const secretsInPlay = new SecretsInPlay();

/**
 * A log destination that writes every line with the secrets in play removed: the one the playground's
 * loggers (its own and LiveKit's) all write to, so that a credential a provider echoed never reaches the log,
 * whichever logger a library wrote it with.
 */
export function redactingDestination(
  to: DestinationStream,
  secrets: SecretsInPlay = secretsInPlay,
): DestinationStream {
  const target = to as DestinationStream & {
    flush?: (cb?: (err?: Error) => void) => void;
    flushSync?: () => void;
  };
  // what pino calls beside write (flushing on exit) goes to the stream underneath
  return {
    write: (line: string) => target.write(secrets.text(line)),
    ...(target.flush ? { flush: (cb?: (err?: Error) => void) => target.flush!(cb) } : {}),
    ...(target.flushSync ? { flushSync: () => target.flushSync!() } : {}),
  };
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
