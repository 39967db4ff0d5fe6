import type { Socket } from 'node:net';
import type { Logger } from 'pino';

const COALESCED = Symbol.for('vab.redis.coalesced-writes');

/**
 * ioredis writes each command to the socket as it is issued: one syscall per command, and one read by
 * Redis. A service answering a batch of bus requests issues tens of commands in one turn of the event
 * loop; corking the socket until setImmediate (right after the I/O phase) sends them in one write, and
 * Redis answers them in one. Order is kept (it is one stream); nothing waits longer than the rest of the
 * current turn.
 *
 * This reaches into ioredis: it takes the connection's socket from ioredis's private `stream` (set anew on
 * every connect) and replaces that socket's `write` with one that corks first. ioredis is pinned to an exact
 * version for it, and a test (storage.test.ts, "ioredis internals changed") fails when an upgrade moves
 * `stream`. Kept over ioredis's own `enableAutoPipelining` and over nothing because it costs the service
 * clearly less CPU per request than either, measured side by side (docs/performance.md › The ioredis write
 * patch, measured again).
 */
export function coalesceWrites(stream: Socket | undefined, log: Logger): void {
  if (!stream || typeof stream.cork !== 'function') {
    log.warn(
      { code: 'REDIS_INTERNALS_CHANGED' },
      'redis socket not as expected: command writes are not coalesced',
    );
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
