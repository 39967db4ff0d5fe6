import { safeError, type Logger } from '@vab/bus';
import { AppError } from '@vab/contracts';
import { storage, type RedisClient } from '@vab/storage';
import type { CallErasure } from './call-erasure.js';
import type { CallsStore } from './calls-store.js';
import type { LiveStore } from './credentials-store.js';
import type { SessionsStore } from '../store.js';

const DAY_MS = 24 * 3600 * 1000;
/** One instance sweeps per interval: the others find the lock taken and skip. Its own slot on a cluster. */
const LOCK = 'ss:{retention}:calls-lock';
/** Calls erased per round trip of one agent's sweep. */
const BATCH = 100;

export interface CallRetentionSettings {
  /** For agents whose `callRetentionDays` is null (CALL_RETENTION_DAYS); 0: kept forever. */
  defaultDays: number;
  intervalMs: number;
}

/**
 * Deletes calls past their agent's retention (`callRetentionDays`, else the operator's default) with their
 * transcripts, recordings and live events, on a timer, from one instance at a time. A call still going on is
 * left alone (its end is what a builder will want to see).
 */
export class CallRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly deps: {
      calls: CallsStore;
      store: SessionsStore;
      live: LiveStore;
      erasure: CallErasure;
      redis: RedisClient;
      log: Logger;
    },
    private readonly settings: CallRetentionSettings,
  ) {}

  start(): void {
    const tick = () => void this.sweepIfFirst();
    this.timer = setInterval(tick, this.settings.intervalMs);
    this.timer.unref();
    setTimeout(tick, Math.min(10_000, this.settings.intervalMs)).unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => 0);
  }

  /** One sweep as of `now`, whoever holds the lock (tests, an operator's repair): how many calls went. */
  sweep(now = Date.now()): Promise<number> {
    this.running ??= this.sweepAll(now).finally(() => (this.running = undefined));
    return this.running;
  }

  private async sweepAll(now: number): Promise<number> {
    const { store, live } = this.deps;
    let removed = 0;
    // a call needs a live deploy, and a deployed agent keeps its subdomain: these are every agent with calls
    for (const agentId of await store.deployedAgents()) {
      const days = (await live.callSettings(agentId)).callRetentionDays ?? this.settings.defaultDays;
      if (days === 0) continue;
      removed += await this.sweepAgent(agentId, now - days * DAY_MS);
    }
    return removed;
  }

  private async sweepAgent(agentId: string, before: number): Promise<number> {
    const { calls, erasure } = this.deps;
    let removed = 0;
    let skipped = 0;
    for (;;) {
      // the calls it could not erase stay first (oldest first): each round asks past them
      const asked = skipped + BATCH;
      const ids = await calls.startedBefore(agentId, before, asked);
      for (const callId of ids.slice(skipped)) {
        try {
          const call = await calls.erase(agentId, callId);
          await erasure.remove(agentId, [callId], call.recording ? [callId] : []);
          removed++;
        } catch (err) {
          // still going on (its end comes later), or gone already: the next sweep sees it again
          if (!(err instanceof AppError)) throw err;
          skipped++;
        }
      }
      if (ids.length < asked) return removed;
    }
  }

  private async sweepIfFirst(): Promise<void> {
    try {
      const mine = await storage(() =>
        this.deps.redis.set(LOCK, '1', 'PX', this.settings.intervalMs - 500, 'NX'),
      );
      if (mine !== 'OK') return;
      const removed = await this.sweep();
      if (removed > 0) this.deps.log.info({ removed }, 'old calls removed');
    } catch (err) {
      this.deps.log.warn({ code: 'CALL_RETENTION_FAILED', err: safeError(err) }, 'call retention failed');
    }
  }
}
