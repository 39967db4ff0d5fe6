import type { StopMode } from '@vab/service-kit';
import type { Registry } from 'prom-client';

/** What a thread is started with (`workerData`). */
export interface ThreadData {
  index: number;
  /** It hosts LiveKit room sessions: the one thread LiveKit's native events reach (thread-main.ts). */
  rooms: boolean;
}

/** A registry's metrics as prom-client's `getMetricsAsJSON` gives them (plain data: they cross threads). */
export type ThreadMetrics = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** The main thread to a thread. */
export type ToThread =
  | { type: 'stop'; reason: string; mode: StopMode }
  | { type: 'metrics'; id: number }
  | { type: 'checks'; id: number }
  /**
   * Every other thread has ended: LiveKit's native side may be disposed of (the rooms thread's last step);
   * `native: false` when a thread died, its native objects left as they were: then it is left to the exit.
   */
  | { type: 'dispose'; native: boolean };

/** A thread to the main thread. */
export type FromThread =
  /** A log line, its credentials already removed (the thread knows its sessions' keys). */
  | { type: 'log'; line: string }
  | { type: 'ready' }
  | { type: 'metrics'; id: number; metrics: ThreadMetrics }
  /** Each dependency check's result; none yet (its connections not made): `{}`. */
  | { type: 'checks'; id: number; results: Record<string, boolean> };
