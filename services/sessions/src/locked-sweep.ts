import { storage, type RedisClient } from '@vab/storage';

/**
 * A sweep run on a timer by one instance of the service at a time (the test-session and call retention, the
 * owner sweep): at each tick the instance that takes the Redis lock `lock` (a key in a cluster slot of its
 * own, held a little less than the interval so the next tick finds it free) sweeps; the others skip. A sweep
 * asked while one runs (the timer's, a test's, an operator's) is that one, and `stop` waits for it.
 */
export class LockedSweep {
  private timer: NodeJS.Timeout | undefined;
  private early: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly opts: {
      redis: RedisClient;
      lock: string;
      intervalMs: number;
      /** How much less than the interval the lock is held (500 ms unless said). */
      lockMarginMs?: number;
      /** A first tick soon after the start (within 10 s), not an interval later (unless false). */
      early?: boolean;
      /** The sweep: how many things it removed or closed. */
      run: () => Promise<number>;
      /** After a sweep of the timer's (its count). */
      swept?: (count: number) => void;
      /** A tick failed (the lock could not be asked for, or the sweep threw): the next tick tries again. */
      failed: (err: unknown) => void;
    },
  ) {}

  start(): void {
    const tick = () => void this.sweepIfFirst();
    this.timer = setInterval(tick, this.opts.intervalMs);
    this.timer.unref();
    if (this.opts.early !== false) {
      this.early = setTimeout(tick, Math.min(10_000, this.opts.intervalMs));
      this.early.unref();
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    // a stopped instance's first tick would run against connections already closed
    clearTimeout(this.early);
    await this.running?.catch(() => 0);
  }

  /** One sweep now, whoever holds the lock (`run`: this sweep's own, e.g. as of another time). */
  sweep(run: () => Promise<number> = this.opts.run): Promise<number> {
    this.running ??= run().finally(() => (this.running = undefined));
    return this.running;
  }

  private async sweepIfFirst(): Promise<void> {
    const { redis, lock, intervalMs, lockMarginMs = 500 } = this.opts;
    try {
      const mine = await storage(() => redis.set(lock, '1', 'PX', intervalMs - lockMarginMs, 'NX'));
      if (mine !== 'OK') return;
      const count = await this.sweep();
      this.opts.swept?.(count);
    } catch (err) {
      this.opts.failed(err);
    }
  }
}
