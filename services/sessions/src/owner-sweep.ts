import type { NatsConnection } from '@nats-io/transport-node';
import { isNoResponders, safeError, type Logger } from '@vab/bus';
import { AppError, liveSubject } from '@vab/contracts';
import type { RedisClient } from '@vab/storage';
import type { CallSummary, EndCallRequest, Recording } from '@vab/contracts';
import { LockedSweep } from './locked-sweep.js';
import type { Recordings } from './recordings.js';
import type { SessionsStore } from './store.js';

/** One instance sweeps per interval: the others find the lock taken and skip. Its own slot on a cluster. */
const LOCK = 'ss:{open}:lock';

export interface OwnerSweepSettings {
  /** How often open sessions are checked for an owner. */
  intervalMs: number;
  /** A session younger than this is not checked (its owner may not have subscribed yet). */
  graceMs: number;
  /** Bound on asking one session's owner. */
  probeTimeoutMs: number;
  /** Sessions checked per sweep at most (the oldest first). */
  batch: number;
}

/**
 * Closes test sessions whose playground instance is gone, as the stale-run sweep errors runs whose driver
 * is gone. The owner of a running session answers on `playground.live.<sessionId>` (what event streams ask
 * too); no responders means no instance holds it. One miss only marks the session (`lostAt`): a playground
 * reconnecting to NATS has no subscriptions for a moment. A second miss at least `intervalMs / 2` later
 * closes it, with the time of the first miss as its end. A probe that times out proves nothing and is
 * asked again next time.
 */
/** Calls are swept too: an active call whose instance is gone ends `instance_lost`, and `ended` tells it. */
export interface CallSweep {
  /** The calls store (live/calls-store.ts), as much of it as the sweep uses. */
  store: {
    openCallsBefore(before: number, batch: number): Promise<{ agentId: string; callId: string }[]>;
    forgetOpenCall(agentId: string, callId: string): Promise<void>;
    end(req: EndCallRequest): Promise<CallSummary | null>;
    setRecording(agentId: string, callId: string, recording: Recording): Promise<void>;
  };
  ended(call: CallSummary): Promise<unknown>;
}

export class OwnerSweep {
  private readonly sweeper: LockedSweep;
  /** When a call's instance was first found gone (this sweeper's memory: another one starts over). */
  private readonly callLostAt = new Map<string, number>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly store: SessionsStore,
    redis: RedisClient,
    private readonly settings: OwnerSweepSettings,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    private readonly calls?: CallSweep,
    /** Names what a killed instance recorded (decision 35); none: nothing is salvaged. */
    private readonly recordings?: Pick<Recordings, 'salvage'>,
  ) {
    this.sweeper = new LockedSweep({
      redis,
      lock: LOCK,
      intervalMs: settings.intervalMs,
      lockMarginMs: 50,
      early: false,
      run: () => this.sweepOnce(),
      failed: (err) => log.warn({ code: 'OWNER_SWEEP_FAILED', err: safeError(err) }, 'owner sweep failed'),
    });
  }

  start(): void {
    this.sweeper.start();
  }

  stop(): Promise<void> {
    return this.sweeper.stop();
  }

  /** One sweep now: how many sessions it closed. */
  sweep(): Promise<number> {
    return this.sweeper.sweep();
  }

  private async sweepOnce(): Promise<number> {
    const now = this.now();
    const open = await this.store.openSessionsBefore(now - this.settings.graceMs, this.settings.batch);
    const verdicts = await Promise.all(open.map((s) => this.ownerAlive(s.sessionId)));
    let closed = 0;
    for (const [i, s] of open.entries()) {
      const alive = verdicts[i];
      if (alive === undefined) continue;
      try {
        if (await this.settle(s, alive, now)) closed++;
      } catch (err) {
        this.log.warn(
          { code: 'OWNER_SWEEP_FAILED', err: safeError(err), sessionId: s.sessionId },
          'owner sweep could not settle a session',
        );
      }
    }
    if (closed > 0)
      this.log.warn({ code: 'SESSIONS_ORPHANED', closed }, 'closed sessions whose owner is gone');
    return closed + (await this.sweepCalls(now));
  }

  /**
   * Active calls whose instance is gone (kill -9, a lost machine: no one ended them) end `instance_lost`, at
   * the time of the first miss, as sessions close: one miss marks, a second at least half an interval later ends.
   */
  private async sweepCalls(now: number): Promise<number> {
    if (!this.calls) return 0;
    const { store, ended } = this.calls;
    const open = await store.openCallsBefore(now - this.settings.graceMs, this.settings.batch);
    const verdicts = await Promise.all(open.map((c) => this.ownerAlive(c.callId)));
    let closed = 0;
    for (const [i, c] of open.entries()) {
      const alive = verdicts[i];
      const key = `${c.agentId}/${c.callId}`;
      if (alive === undefined) continue;
      if (alive) {
        this.callLostAt.delete(key);
        continue;
      }
      const since = this.callLostAt.get(key) ?? now;
      this.callLostAt.set(key, since);
      if (now - since < this.settings.intervalMs / 2) continue;
      try {
        const call = await store.end({
          agentId: c.agentId,
          callId: c.callId,
          endedAt: since,
          endedReason: 'instance_lost',
          usage: [],
        });
        this.callLostAt.delete(key);
        if (call) {
          closed++;
          // what its instance recorded before it died is kept and named (decision 35), before `ended` tells it
          const recording = await this.recordings?.salvage(c.agentId, c.callId);
          if (recording) await store.setRecording(c.agentId, c.callId, recording);
          await ended(recording ? { ...call, recording } : call);
        }
      } catch (err) {
        if (err instanceof AppError && err.code === 'NOT_FOUND')
          await store.forgetOpenCall(c.agentId, c.callId);
        else
          this.log.warn(
            { code: 'OWNER_SWEEP_FAILED', err: safeError(err), callId: c.callId },
            'owner sweep could not end a call',
          );
      }
    }
    if (closed > 0) this.log.warn({ code: 'CALLS_ORPHANED', closed }, 'ended calls whose instance is gone');
    return closed;
  }

  /** True when the session was closed now. */
  private async settle(
    s: { agentId: string; sessionId: string; startedAt: number },
    alive: boolean,
    now: number,
  ): Promise<boolean> {
    let session;
    try {
      session = await this.store.getSession(s.agentId, s.sessionId);
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'NOT_FOUND')) throw err;
      await this.store.forgetOpen(s.agentId, s.sessionId);
      return false;
    }
    if (session.status === 'closed') {
      await this.store.forgetOpen(s.agentId, s.sessionId);
      return false;
    }
    if (alive) {
      await this.store.lostSince(s.agentId, s.sessionId, undefined);
      return false;
    }
    const since = (await this.store.lostSince(s.agentId, s.sessionId, now)) ?? now;
    if (now - since < this.settings.intervalMs / 2) return false;
    const endedAt = Math.max(since, session.startedAt);
    await this.store.closeLost(s.agentId, s.sessionId, endedAt, endedAt - session.startedAt);
    // what its instance recorded before it died (written as it was made: decision 35) is kept and named
    const recording = await this.recordings?.salvage(s.agentId, s.sessionId);
    if (recording) await this.store.setRecording(s.agentId, s.sessionId, recording);
    return true;
  }

  /** Whether an instance holds the session; undefined when that cannot be told now. */
  private async ownerAlive(sessionId: string): Promise<boolean | undefined> {
    try {
      await this.nc.request(liveSubject(sessionId), '', { timeout: this.settings.probeTimeoutMs });
      return true;
    } catch (err) {
      // NATS answers at once when nobody subscribes: the owner is gone; a timeout proves nothing
      if (isNoResponders(err)) return false;
      return undefined;
    }
  }
}
