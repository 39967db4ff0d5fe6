import type { Logger } from '@vab/bus';
import { behindRealTime } from '../models/behind-real-time.js';
import { monitorEventLoopDelay, performance, type IntervalHistogram } from 'node:perf_hooks';

/** The thresholds an operator tunes (docs/operations.md › Load-based admission). */
export interface LoadConfig {
  /** How often the instance's load is measured. */
  LOAD_CHECK_INTERVAL_MS: number;
  /** Event-loop delay p99 over one interval past which the instance takes no new session (0: not checked). */
  LOAD_MAX_EVENT_LOOP_P99_MS: number;
  /** The worst session's audio this far behind real time: no new session (0: not checked). */
  LOAD_MAX_BEHIND_MS: number;
  /** The process's CPU, percent of one core over one interval, past which no new session (0: not checked). */
  LOAD_MAX_CPU_PERCENT: number;
  /**
   * A measure past its threshold in every interval for this long before the instance is overloaded, because
   * a start-up's model loading or one burst put one interval past a threshold and a single instance then
   * refused every start for LOAD_RECOVER_MS (0: at the first interval past one).
   */
  LOAD_OVER_FOR_MS: number;
  /** Every measure back under its threshold for this long before the instance takes sessions again. */
  LOAD_RECOVER_MS: number;
  /** A session whose audio falls this far behind real time is ended (`behind real time`) (0: never). */
  SESSION_MAX_BEHIND_MS: number;
}

/** One interval's measures. */
export interface LoadSample {
  eventLoopP99Ms: number;
  /** How far the worst session's audio is behind real time (its VAD's queue). */
  behindMs: number;
  cpuPercent: number;
}

/** Measures the process over one interval: event-loop delay, the sessions' lag, CPU. */
class ProcessLoad {
  private readonly histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  private cpu = process.cpuUsage();
  private at = performance.now();

  start(): void {
    this.histogram.enable();
  }

  stop(): void {
    this.histogram.disable();
  }

  sample(): LoadSample & { bySession: Map<string, number> } {
    const now = performance.now();
    const cpu = process.cpuUsage(this.cpu);
    const elapsedMs = Math.max(1, now - this.at);
    this.cpu = process.cpuUsage();
    this.at = now;
    // the histogram counts a 10 ms timer's whole period: the delay is what lies beyond it
    const eventLoopP99Ms =
      this.histogram.count > 0 ? Math.max(0, this.histogram.percentile(99) / 1e6 - 10) : 0;
    this.histogram.reset();
    const { worstMs, bySession } = behindRealTime.read();
    return {
      eventLoopP99Ms,
      behindMs: worstMs,
      cpuPercent: ((cpu.user + cpu.system) / 1000 / elapsedMs) * 100,
      bySession,
    };
  }
}

/** Which measures are past their thresholds (none: under every one). */
export function overThresholds(sample: LoadSample, config: LoadConfig): string[] {
  const over: string[] = [];
  if (config.LOAD_MAX_EVENT_LOOP_P99_MS > 0 && sample.eventLoopP99Ms > config.LOAD_MAX_EVENT_LOOP_P99_MS)
    over.push('eventLoopP99Ms');
  if (config.LOAD_MAX_BEHIND_MS > 0 && sample.behindMs > config.LOAD_MAX_BEHIND_MS) over.push('behindMs');
  if (config.LOAD_MAX_CPU_PERCENT > 0 && sample.cpuPercent > config.LOAD_MAX_CPU_PERCENT)
    over.push('cpuPercent');
  return over;
}

/**
 * Load-based admission (LiveKit's workers' `load_threshold`, for this instance): each interval the process's
 * load is measured; past a threshold for LOAD_OVER_FOR_MS (sessions behind real time: at once) the instance is overloaded (it leaves the start subjects' queue
 * groups: another instance takes the next session, or the start answers 503 with Retry-After), and takes
 * sessions again only once every measure stayed under its threshold for LOAD_RECOVER_MS (hysteresis: an
 * instance at the edge does not flap in and out of the groups). Sessions already admitted keep going; one
 * whose audio is more than SESSION_MAX_BEHIND_MS behind real time is handed to `tooFarBehind`.
 */
export class LoadMonitor {
  private readonly load = new ProcessLoad();
  private timer: NodeJS.Timeout | undefined;
  private overloaded = false;
  private underSince: number | undefined;
  private overSince: number | undefined;
  /** The last interval's measures (the metrics read them). */
  last: LoadSample = { eventLoopP99Ms: 0, behindMs: 0, cpuPercent: 0 };

  constructor(
    private readonly deps: {
      log: Logger;
      config: LoadConfig;
      /** The instance became overloaded (true) or recovered (false). */
      onChange(overloaded: boolean): void;
      /** A session whose audio is too far behind real time. */
      tooFarBehind(sessionId: string, behindMs: number): void;
      now?: () => number;
    },
  ) {}

  start(): void {
    this.load.start();
    this.timer = setInterval(() => this.check(), this.deps.config.LOAD_CHECK_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.load.stop();
  }

  get isOverloaded(): boolean {
    return this.overloaded;
  }

  private check(): void {
    const { bySession, ...sample } = this.load.sample();
    // every interval's figures, for an operator (or bench/admission.mjs) watching the thresholds at debug level
    this.deps.log.debug({ sessions: bySession.size, ...rounded(sample) }, 'load sample');
    this.judge(sample);
    const bound = this.deps.config.SESSION_MAX_BEHIND_MS;
    if (bound > 0)
      for (const [sessionId, ms] of bySession) if (ms > bound) this.deps.tooFarBehind(sessionId, ms);
  }

  /** One interval's verdict (exported through the class for its test). */
  judge(sample: LoadSample): void {
    const { config, log } = this.deps;
    const now = (this.deps.now ?? Date.now)();
    this.last = sample;
    const over = overThresholds(sample, config);
    if (over.length > 0) {
      this.underSince = undefined;
      this.overSince ??= now;
      // sessions behind real time are callers already heard late: no wait to see whether it lasts (the wait
      // is for the event loop's and the CPU's spikes, a start-up's model loading; at 5 new calls a second it
      // let 15 more in while the admitted ones went from 0.5 s to 2.9 s behind, and 30 of them were ended)
      const lasted = over.includes('behindMs') || now - this.overSince >= config.LOAD_OVER_FOR_MS;
      if (!this.overloaded && lasted) {
        this.overloaded = true;
        log.warn(
          { code: 'INSTANCE_OVERLOADED', over, ...rounded(sample) },
          'overloaded: no longer taking new sessions',
        );
        this.deps.onChange(true);
      }
      return;
    }
    this.overSince = undefined;
    if (!this.overloaded) return;
    this.underSince ??= now;
    if (now - this.underSince >= config.LOAD_RECOVER_MS) {
      this.overloaded = false;
      this.underSince = undefined;
      log.info(rounded(sample), 'load recovered: taking new sessions again');
      this.deps.onChange(false);
    }
  }
}

const rounded = (s: LoadSample) => ({
  eventLoopP99Ms: Math.round(s.eventLoopP99Ms),
  behindMs: Math.round(s.behindMs),
  cpuPercent: Math.round(s.cpuPercent),
});
