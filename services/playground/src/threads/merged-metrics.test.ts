import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { mergeMetrics } from './merged-metrics.js';
import { threadEnv } from './supervisor.js';

/** A thread's registry as a playground thread fills it: a process-wide series and its own. */
async function threadRegistry(sessions: number, turnSeconds: number) {
  const registry = new Registry();
  const registers = [registry];
  new Gauge({ name: 'process_resident_memory_bytes', help: 'rss', registers }).set(1e9);
  new Gauge({ name: 'nodejs_heap_size_used_bytes', help: 'heap', registers }).set(sessions * 1e6);
  new Gauge({ name: 'playground_sessions_active', help: 'a', labelNames: ['session_type'], registers }).set(
    { session_type: 'voice' },
    sessions,
  );
  new Histogram({ name: 'turn_seconds', help: 't', buckets: [1, 2], registers }).observe(turnSeconds);
  new Counter({ name: 'errors_total', help: 'e', registers }).inc(0);
  return registry.getMetricsAsJSON();
}

describe('the process’s one exposition (threads/merged-metrics.ts)', () => {
  it('labels each thread’s series with its thread, keeps the process’s once, and sums nothing', async () => {
    const main = new Registry();
    new Gauge({ name: 'process_resident_memory_bytes', help: 'rss', registers: [main] }).set(2e9);
    new Gauge({ name: 'nodejs_heap_size_used_bytes', help: 'heap', registers: [main] }).set(5);
    new Gauge({
      name: 'process_start_time_seconds',
      help: 'start',
      registers: [main],
      aggregator: 'omit',
    }).set(7);
    const text = await mergeMetrics(await main.getMetricsAsJSON(), [
      { thread: 0, metrics: await threadRegistry(3, 0.5) },
      { thread: 1, metrics: await threadRegistry(4, 1.5) },
    ]).metrics();
    const lines = text.split('\n');
    // one HELP and TYPE per family
    expect(lines.filter((l) => l.startsWith('# TYPE nodejs_heap_size_used_bytes '))).toHaveLength(1);
    // the process's: the main thread's alone, unlabelled (the threads' copies dropped), even one marked `omit`
    expect(lines.filter((l) => l.startsWith('process_resident_memory_bytes'))).toEqual([
      'process_resident_memory_bytes 2000000000',
    ]);
    expect(lines).toContain('process_start_time_seconds 7');
    // a family the threads have too: the main thread's series labelled `main`
    expect(lines).toContain('nodejs_heap_size_used_bytes{thread="main"} 5');
    expect(lines).toContain('nodejs_heap_size_used_bytes{thread="0"} 3000000');
    expect(lines).toContain('playground_sessions_active{session_type="voice",thread="0"} 3');
    expect(lines).toContain('playground_sessions_active{session_type="voice",thread="1"} 4');
    // histograms per thread, bucket by bucket
    expect(lines).toContain('turn_seconds_bucket{le="1",thread="0"} 1');
    expect(lines).toContain('turn_seconds_bucket{le="1",thread="1"} 0');
    expect(lines).toContain('turn_seconds_count{thread="1"} 1');
    expect(lines).toContain('errors_total{thread="1"} 0');
  });
});

describe('a thread’s environment (threadEnv)', () => {
  it('names the thread after the process and splits the process’s sessions and analyses between the threads', () => {
    const env = {
      PLAYGROUND_THREADS: '3',
      INSTANCE_ID: 'pg-a',
      MAX_SESSIONS: '50',
      ANALYSIS_CONCURRENCY: '2',
      LOAD_MAX_CPU_PERCENT: '90',
      METRICS_PORT: '9464',
    };
    const config = loadConfig(env);
    const threads = [0, 1, 2].map((i) => threadEnv(config, env, i));
    expect(threads.map((t) => t.INSTANCE_ID)).toEqual(['pg-a-t0', 'pg-a-t1', 'pg-a-t2']);
    expect(threads.map((t) => Number(t.MAX_SESSIONS))).toEqual([17, 17, 16]);
    expect(threads.map((t) => Number(t.ANALYSIS_CONCURRENCY))).toEqual([1, 1, 0]);
    // each thread measures the process's CPU: its threshold is the process's share of three cores
    expect(threads.every((t) => t.LOAD_MAX_CPU_PERCENT === '270')).toBe(true);
    // a thread is one instance: no threads of its own, no ops port (the main thread's is the process's)
    for (const t of threads) {
      const own = loadConfig(t);
      expect(own.PLAYGROUND_THREADS).toBe(1);
      expect(own.METRICS_PORT).toBeUndefined();
    }
  });

  it('refuses more threads than sessions, and an INSTANCE_ID too long to be named per thread', () => {
    expect(() => loadConfig({ PLAYGROUND_THREADS: '4', MAX_SESSIONS: '3' })).toThrow(/PLAYGROUND_THREADS/);
    expect(() => loadConfig({ PLAYGROUND_THREADS: '2', INSTANCE_ID: 'x'.repeat(61) })).toThrow(/INSTANCE_ID/);
    expect(loadConfig({ PLAYGROUND_THREADS: 'auto' }).PLAYGROUND_THREADS).toBeGreaterThanOrEqual(1);
    expect(loadConfig({}).PLAYGROUND_THREADS).toBe(1);
  });
});
