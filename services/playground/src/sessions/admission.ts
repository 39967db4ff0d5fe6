import { AsyncLocalStorage } from 'node:async_hooks';
import type { Logger, Served } from '@vab/bus';
import { AppError, type SessionType } from '@vab/contracts';
import { playgroundMetrics, type CapacityView } from '../observability/metrics.js';
import type { CallerSlot, CallerSlots } from './caller-slots.js';
import type { HostedSessionsConfig } from './session-context.js';

/** What admission reads of the sessions held: those that hold capacity (not yet given back). */
export interface HeldSessions {
  /** Sessions that hold capacity. */
  held(): number;
  /** Of those, the ones `caller` started. */
  heldBy(caller: string): number;
  count(sessionType: SessionType): number;
}

/**
 * Who may start a session here: one capacity rule for voice and text (at MAX_SESSIONS, overloaded (`load.ts`)
 * or draining the instance leaves the create subjects' queue groups, and rejoins when a slot frees or the load
 * recovers) and the per-caller quota (this instance's count
 * first, then the caller's slots across every instance). The process's session gauges read it.
 */
export class Admission implements CapacityView {
  /** Starts under way: they hold a slot. */
  private reserved = 0;
  /** Starts under way per caller: they count against the caller's quota. */
  private readonly reservedBy = new Map<string, number>();
  /** The caller a start runs for (`asCaller`), read where the session opens: the transports need not pass it. */
  private readonly callerScope = new AsyncLocalStorage<string | undefined>();
  private served: Served | undefined;
  /** Out of the create subjects' queue groups (full, overloaded or draining). */
  private full = false;
  /** Too loaded to take a session (`LoadMonitor`), until it recovers. */
  private overloaded = false;
  /** Stopping: it takes no session again. */
  private draining = false;

  constructor(
    private readonly deps: {
      log: Logger;
      config: Pick<HostedSessionsConfig, 'MAX_SESSIONS' | 'MAX_SESSIONS_PER_CALLER'>;
      /** The subjects that start sessions: left while the instance is full. */
      createSubjects: readonly string[];
      /** The callers' slots across instances (MAX_SESSIONS_PER_CALLER); none: this instance counts alone. */
      slots?: CallerSlots | undefined;
      sessions: HeldSessions;
    },
  ) {}

  /** Capacity is enforced on the served subjects from now on, and the process's gauges read this instance. */
  attach(served: Served): void {
    this.served = served;
    playgroundMetrics().instances.add(this);
    void this.recount();
  }

  /** The gauges stop reading this instance (it has stopped). */
  detach(): void {
    playgroundMetrics().instances.delete(this);
  }

  get capacity(): number {
    return this.deps.config.MAX_SESSIONS;
  }

  get paused(): boolean {
    return this.full;
  }

  get size(): number {
    return this.deps.sessions.held() + this.reserved;
  }

  count(sessionType: SessionType): number {
    return this.deps.sessions.count(sessionType);
  }

  /** The load monitor's verdict: an overloaded instance takes no session until it recovers. */
  setOverloaded(overloaded: boolean): Promise<void> {
    this.overloaded = overloaded;
    return this.recount();
  }

  /** Takes no session from now on (SIGTERM): the instance leaves the create subjects' queue groups at once. */
  drain(): Promise<void> {
    this.draining = true;
    return this.recount();
  }

  /** Why no session may start here now, if none may. */
  private refusal(): string | undefined {
    if (this.draining) return 'playground instance stopping, retry shortly (another instance takes it)';
    if (this.overloaded) return 'playground instance overloaded, retry shortly (another instance takes it)';
    if (this.size >= this.deps.config.MAX_SESSIONS) return 'playground at capacity, retry shortly';
    return undefined;
  }

  /** Leaves or rejoins the create subjects by the count and the load; resolves once the server has a rejoin. */
  async recount(): Promise<void> {
    const served = this.served;
    if (!served) return;
    const { MAX_SESSIONS } = this.deps.config;
    const refusing = this.refusal() !== undefined;
    if (!this.full && refusing) {
      this.full = true;
      for (const s of this.deps.createSubjects) served.pause(s);
      // overload and draining say so where they start
      if (this.size >= MAX_SESSIONS)
        this.deps.log.warn(
          { code: 'AT_CAPACITY', sessions: this.size },
          'at capacity: no longer taking new sessions',
        );
    } else if (this.full && !refusing) {
      this.full = false;
      this.deps.log.info({ sessions: this.size }, 'taking new sessions again');
      await Promise.all(this.deps.createSubjects.map((s) => served.resume(s)));
    }
  }

  /** Runs `start` (a session start) for `caller`: the session it opens counts against that caller's quota. */
  asCaller<T>(caller: string | undefined, start: () => Promise<T>): Promise<T> {
    return caller === undefined ? start() : this.callerScope.run(caller, start);
  }

  /** Sessions a caller holds here, starts under way included. */
  private heldBy(caller: string): number {
    return (this.reservedBy.get(caller) ?? 0) + this.deps.sessions.heldBy(caller);
  }

  /**
   * Admits a start: takes a slot (or answers 503 CAPACITY_EXHAUSTED when there is none, 429 when its caller holds its quota) and
   * runs `register` while it holds it. Answers what `register` made and the caller's slot across instances it
   * now holds; a failed `register` gives the slot back.
   */
  async admit<T>(
    requestId: string,
    register: (caller: string | undefined) => Promise<T>,
  ): Promise<{ admitted: T; slot: CallerSlot | undefined }> {
    const refusal = this.refusal();
    // a start already delivered when the instance left the queue groups: the caller retries (Retry-After)
    if (refusal !== undefined) throw new AppError('CAPACITY_EXHAUSTED', refusal);
    const caller = this.callerScope.getStore();
    const quota = this.deps.config.MAX_SESSIONS_PER_CALLER ?? 0;
    const overQuota = () =>
      new AppError(
        'RATE_LIMITED',
        `at most ${quota} sessions may be open at once per caller: end one (DELETE it) or wait for one to end`,
      );
    // this instance's own count first (no round trip), then the caller's slots across every instance
    if (caller !== undefined && quota > 0 && this.heldBy(caller) >= quota) throw overQuota();
    this.reserved++;
    if (caller !== undefined) this.reservedBy.set(caller, (this.reservedBy.get(caller) ?? 0) + 1);
    void this.recount();
    let slot: CallerSlot | false | undefined;
    try {
      if (caller !== undefined && quota > 0) slot = await this.deps.slots?.take(caller, requestId);
      if (slot === false) throw overQuota();
      return { admitted: await register(caller), slot };
    } catch (err) {
      if (slot) await slot.release();
      throw err;
    } finally {
      this.reserved--;
      if (caller !== undefined) {
        const left = (this.reservedBy.get(caller) ?? 1) - 1;
        if (left <= 0) this.reservedBy.delete(caller);
        else this.reservedBy.set(caller, left);
      }
      void this.recount();
    }
  }
}
