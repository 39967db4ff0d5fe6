import { AppError } from '@vab/contracts';
import { Redis } from 'ioredis';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

export { Redis } from 'ioredis';

/**
 * A Redis connection that reconnects forever (a restarted Redis must not need a restart of ours) but
 * fails a command after one retry, so a request during an outage answers 503 quickly instead of hanging
 * until the gateway's timeout.
 */
export function createRedis(url: string, log: Logger, opts: { name: string }): Redis {
  const redis = new Redis(url, {
    connectionName: opts.name,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
    lazyConnect: false,
  });
  let down = false;
  redis.on('error', (err: Error) => {
    if (!down) log.warn({ err: err.message }, 'redis error');
    down = true;
  });
  redis.on('ready', () => {
    if (down) log.info('redis reconnected');
    down = false;
  });
  // every (re)connect makes a new socket
  redis.on('connect', () => coalesceWrites((redis as unknown as { stream?: Socket }).stream, log));
  return redis;
}

const COALESCED = Symbol.for('vab.redis.coalesced-writes');

/**
 * ioredis writes each command to the socket as it is issued: one syscall per command, and one read by
 * Redis. A service answering a batch of bus requests issues tens of commands in one turn of the event
 * loop; corking the socket until setImmediate (right after the I/O phase) sends them in one write, and
 * Redis answers them in one. Order is kept (it is one stream); nothing waits longer than the rest of the
 * current turn. Kept over ioredis's own `enableAutoPipelining`, which cost the service more CPU per request
 * than this did, measured side by side (docs/performance.md › Libraries before patches).
 */
function coalesceWrites(stream: Socket | undefined, log: Logger): void {
  if (!stream || typeof stream.cork !== 'function') {
    log.warn('redis socket not as expected: command writes are not coalesced');
    return;
  }
  const s = stream as Socket & { [COALESCED]?: true };
  if (s[COALESCED]) return;
  s[COALESCED] = true;
  const write = s.write;
  s.write = function (this: Socket, ...args: unknown[]): boolean {
    if (this.writableCorked === 0 && !this.destroyed) {
      this.cork();
      setImmediate(() => this.uncork());
    }
    return (write as (...a: unknown[]) => boolean).apply(this, args);
  } as Socket['write'];
}

/** Redis failures of connectivity become SERVICE_UNAVAILABLE; anything else is left to the bus (INTERNAL). */
function translateRedisError(err: unknown): unknown {
  if (err instanceof AppError) return err;
  if (err instanceof Error) {
    const name = err.name;
    const msg = err.message;
    if (
      name === 'MaxRetriesPerRequestError' ||
      msg.includes('Connection is closed') ||
      msg.includes('ECONNREFUSED') ||
      msg.includes('ECONNRESET') ||
      msg.includes('LOADING') ||
      msg.includes("Stream isn't writeable")
    ) {
      return new AppError('SERVICE_UNAVAILABLE', 'storage is unavailable, retry shortly');
    }
  }
  return err;
}

/** Runs a storage operation and rethrows connectivity failures as SERVICE_UNAVAILABLE. */
export async function storage<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw translateRedisError(err);
  }
}

/**
 * Lua scripts that signal an expected failure do `return redis.error_reply('CODE detail')`; this maps the
 * first word to an AppError, so a script's business refusals cross the bus with their own code.
 */
export function scriptError(err: unknown, messages: Record<string, (detail: string) => AppError>): unknown {
  if (err instanceof Error) {
    // Redis prefixes `ERR ` to an error_reply whose text has no space of its own.
    const [word, ...rest] = err.message.replace(/^ERR /, '').split(' ');
    const make = word ? messages[word] : undefined;
    if (make) return make(rest.join(' '));
  }
  return translateRedisError(err);
}
