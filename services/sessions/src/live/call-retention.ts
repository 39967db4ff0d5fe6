import { safeError, type Logger } from '@vab/bus';
import { AppError } from '@vab/contracts';
import type { RedisClient } from '@vab/storage';
import { LockedSweep } from '../locked-sweep.js';
import type { CallErasure } from './call-erasure.js';
import type { CallsStore } from './calls-store.js';
import type { DomainEvents } from './domain-events.js';
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
  private readonly sweeper: LockedSweep;

  constructor(
    private readonly deps: {
      calls: CallsStore;
      store: SessionsStore;
      live: LiveStore;
      erasure: CallErasure;
      /** Tells who listens that a call is gone (the webhooks service cancels its pending deliveries). */
      events: DomainEvents;
      redis: RedisClient;
      log: Logger;
    },
    private readonly settings: CallRetentionSettings,
  ) {
    const { redis, log } = deps;
    this.sweeper = new LockedSweep({
      redis,
      lock: LOCK,
      intervalMs: settings.intervalMs,
      run: () => this.sweepAll(Date.now()),
      swept: (removed) => {
        if (removed > 0) log.info({ removed }, 'old calls removed');
      },
      failed: (err) =>
        log.warn({ code: 'CALL_RETENTION_FAILED', err: safeError(err) }, 'call retention failed'),
    });
  }

  start(): void {
    this.sweeper.start();
  }

  stop(): Promise<void> {
    return this.sweeper.stop();
  }

  /** One sweep as of `now`, whoever holds the lock (tests, an operator's repair): how many calls went. */
  sweep(now = Date.now()): Promise<number> {
    return this.sweeper.sweep(() => this.sweepAll(now));
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
    const { calls, erasure, events } = this.deps;
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
          await events.publish(agentId, 'call.erased', { callId });
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
}
