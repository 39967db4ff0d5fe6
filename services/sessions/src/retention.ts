import { safeError, type Logger } from '@vab/bus';
import { storage, type RedisClient } from '@vab/storage';
import type { Recordings } from './recordings.js';
import type { SessionsStore } from './store.js';

const DAY_MS = 24 * 3600 * 1000;
/** One instance sweeps per interval: the others find the lock taken and skip. Its own slot on a cluster. */
const LOCK = 'ss:{retention}:lock';

export interface RetentionSettings {
  /** 0 = test sessions are kept forever. */
  testSessionDays: number;
  intervalMs: number;
}

/** Deletes test sessions past their retention (and their recordings), on a timer, from one instance at a time. */
export class SessionRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly store: SessionsStore,
    private readonly redis: RedisClient,
    private readonly settings: RetentionSettings,
    private readonly log: Logger,
    private readonly recordings: Recordings,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    if (this.settings.testSessionDays === 0) return;
    const tick = () => void this.sweepIfFirst();
    this.timer = setInterval(tick, this.settings.intervalMs);
    this.timer.unref();
    setTimeout(tick, Math.min(10_000, this.settings.intervalMs)).unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => 0);
  }

  /** One sweep now, whoever holds the lock (tests, an operator's repair): how many sessions went. */
  async sweep(): Promise<number> {
    if (this.settings.testSessionDays === 0) return 0;
    this.running ??= this.store
      .sweepSessions(this.now() - this.settings.testSessionDays * DAY_MS, 100, (agentId, ids) =>
        this.recordings.remove(agentId, ids),
      )
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async sweepIfFirst(): Promise<void> {
    try {
      const mine = await storage(() => this.redis.set(LOCK, '1', 'PX', this.settings.intervalMs - 500, 'NX'));
      if (mine !== 'OK') return;
      const removed = await this.sweep();
      if (removed > 0)
        this.log.info({ removed, days: this.settings.testSessionDays }, 'old test sessions removed');
    } catch (err) {
      this.log.warn(
        { code: 'SESSION_RETENTION_FAILED', err: safeError(err) },
        'test-session retention failed',
      );
    }
  }
}
