import { safeError, type Logger } from '@vab/bus';
import type { RedisClient } from '@vab/storage';
import { LockedSweep } from './locked-sweep.js';
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
  private readonly sweeper: LockedSweep;

  constructor(
    private readonly store: SessionsStore,
    redis: RedisClient,
    private readonly settings: RetentionSettings,
    log: Logger,
    private readonly recordings: Recordings,
    private readonly now: () => number = Date.now,
  ) {
    this.sweeper = new LockedSweep({
      redis,
      lock: LOCK,
      intervalMs: settings.intervalMs,
      run: () =>
        this.store.sweepSessions(this.now() - this.settings.testSessionDays * DAY_MS, 100, (agentId, ids) =>
          this.recordings.remove(agentId, ids),
        ),
      swept: (removed) => {
        if (removed > 0) log.info({ removed, days: settings.testSessionDays }, 'old test sessions removed');
      },
      failed: (err) =>
        log.warn({ code: 'SESSION_RETENTION_FAILED', err: safeError(err) }, 'test-session retention failed'),
    });
  }

  start(): void {
    if (this.settings.testSessionDays === 0) return;
    this.sweeper.start();
  }

  stop(): Promise<void> {
    return this.sweeper.stop();
  }

  /** One sweep now, whoever holds the lock (tests, an operator's repair): how many sessions went. */
  async sweep(): Promise<number> {
    if (this.settings.testSessionDays === 0) return 0;
    return this.sweeper.sweep();
  }
}
