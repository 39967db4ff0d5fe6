import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { behindRealTime } from '../models/behind-real-time.js';
import { LoadMonitor, overThresholds, type LoadConfig } from './load.js';

const config: LoadConfig = {
  LOAD_CHECK_INTERVAL_MS: 50,
  LOAD_MAX_EVENT_LOOP_P99_MS: 100,
  LOAD_MAX_BEHIND_MS: 500,
  LOAD_MAX_CPU_PERCENT: 90,
  LOAD_OVER_FOR_MS: 0,
  LOAD_RECOVER_MS: 1000,
  SESSION_MAX_BEHIND_MS: 300,
};
const quiet = { eventLoopP99Ms: 5, behindMs: 0, cpuPercent: 20 };

describe('load-based admission', () => {
  it('names each measure past its threshold, and none that is off (0)', () => {
    expect(overThresholds(quiet, config)).toEqual([]);
    expect(overThresholds({ eventLoopP99Ms: 150, behindMs: 600, cpuPercent: 95 }, config)).toEqual([
      'eventLoopP99Ms',
      'behindMs',
      'cpuPercent',
    ]);
    const off = { ...config, LOAD_MAX_EVENT_LOOP_P99_MS: 0, LOAD_MAX_BEHIND_MS: 0, LOAD_MAX_CPU_PERCENT: 0 };
    expect(overThresholds({ eventLoopP99Ms: 900, behindMs: 9000, cpuPercent: 200 }, off)).toEqual([]);
  });

  it('is overloaded at once, and recovers only after LOAD_RECOVER_MS under every threshold', () => {
    let now = 0;
    const changes: boolean[] = [];
    const monitor = new LoadMonitor({
      log: pino({ level: 'silent' }),
      config,
      onChange: (o) => changes.push(o),
      tooFarBehind: () => undefined,
      now: () => now,
    });
    monitor.judge({ ...quiet, eventLoopP99Ms: 300 });
    expect(changes).toEqual([true]);
    // under, over again, under: the recovery's clock starts over
    now = 500;
    monitor.judge(quiet);
    now = 900;
    monitor.judge({ ...quiet, cpuPercent: 99 });
    now = 1000;
    monitor.judge(quiet);
    now = 1900;
    monitor.judge(quiet);
    expect(changes).toEqual([true]);
    expect(monitor.isOverloaded).toBe(true);
    now = 2000;
    monitor.judge(quiet);
    expect(changes).toEqual([true, false]);
    expect(monitor.isOverloaded).toBe(false);
  });

  it('waits LOAD_OVER_FOR_MS for the event loop and the CPU, not for sessions already behind real time', () => {
    let now = 0;
    const changes: boolean[] = [];
    const monitor = new LoadMonitor({
      log: pino({ level: 'silent' }),
      config: { ...config, LOAD_OVER_FOR_MS: 3000 },
      onChange: (o) => changes.push(o),
      tooFarBehind: () => undefined,
      now: () => now,
    });
    // a loop held and a busy CPU for 2 s: a spike (a start-up's models, a collection), still taking sessions
    monitor.judge({ ...quiet, eventLoopP99Ms: 300, cpuPercent: 99 });
    now = 2000;
    monitor.judge({ ...quiet, eventLoopP99Ms: 300, cpuPercent: 99 });
    expect(changes).toEqual([]);
    now = 3000;
    monitor.judge({ ...quiet, eventLoopP99Ms: 300 });
    expect(changes).toEqual([true]);

    // admitted callers heard late: overloaded at the first interval that says so
    now = 0;
    const behind: boolean[] = [];
    const other = new LoadMonitor({
      log: pino({ level: 'silent' }),
      config: { ...config, LOAD_OVER_FOR_MS: 3000 },
      onChange: (o) => behind.push(o),
      tooFarBehind: () => undefined,
      now: () => now,
    });
    other.judge({ ...quiet, behindMs: 600 });
    expect(behind).toEqual([true]);
  });

  it('hands over a session whose audio is past SESSION_MAX_BEHIND_MS, and sees the worst lag', async () => {
    const behind: [string, number][] = [];
    const monitor = new LoadMonitor({
      log: pino({ level: 'silent' }),
      config,
      onChange: () => undefined,
      tooFarBehind: (id, ms) => behind.push([id, ms]),
    });
    const deaf = {};
    const fine = {};
    behindRealTime.sessionOf = () => 'deaf-session';
    behindRealTime.report(deaf, 800);
    behindRealTime.sessionOf = () => 'fine-session';
    behindRealTime.report(fine, 20);
    monitor.start();
    try {
      await expect.poll(() => behind.length).toBeGreaterThan(0);
      expect(behind[0]).toEqual(['deaf-session', 800]);
      expect(behind.some(([id]) => id === 'fine-session')).toBe(false);
      expect(monitor.last.behindMs).toBe(800);
      // gone with its stream
      behindRealTime.forget(deaf);
      behindRealTime.forget(fine);
      expect(behindRealTime.read().worstMs).toBe(0);
    } finally {
      monitor.stop();
      behindRealTime.sessionOf = () => undefined;
    }
  });

  it('is overloaded only once a measure stayed past its threshold for LOAD_OVER_FOR_MS', () => {
    let now = 0;
    const changes: boolean[] = [];
    const monitor = new LoadMonitor({
      log: pino({ level: 'silent' }),
      config: { ...config, LOAD_OVER_FOR_MS: 2000 },
      onChange: (o) => changes.push(o),
      tooFarBehind: () => undefined,
      now: () => now,
    });
    // a start-up's burst: two intervals over, then under
    monitor.judge({ ...quiet, cpuPercent: 150 });
    now = 1000;
    monitor.judge({ ...quiet, cpuPercent: 150 });
    now = 2000;
    monitor.judge(quiet);
    expect(changes).toEqual([]);
    // sustained: over from 3000 to 5000
    for (now = 3000; now <= 5000; now += 1000) monitor.judge({ ...quiet, eventLoopP99Ms: 300 });
    expect(changes).toEqual([true]);
  });
});
