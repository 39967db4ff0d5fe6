import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FastHistogram } from './fast-histogram.js';

describe('FastHistogram', () => {
  // (prom-client writes labels in the order of the first observation's object; ours in labelNames' order)
  it("writes exactly what prom-client's Histogram writes for the same observations", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const opts = {
      name: 'h_seconds',
      help: 'a histogram',
      labelNames: ['route', 'code'] as const,
      buckets: [0.01, 0.1, 1],
    };
    const fast = new FastHistogram({ ...opts, registers: [ours] });
    const reference = new Histogram({ ...opts, labelNames: [...opts.labelNames], registers: [theirs] });
    const observations: [Record<'route' | 'code', string | number>, number][] = [
      [{ route: '/a', code: 200 }, 0.005],
      [{ route: '/a', code: 200 }, 0.01],
      [{ route: '/a', code: 200 }, 0.5],
      [{ route: '/b', code: 404 }, 3],
      [{ route: '/a', code: 500 }, 0.1],
      [{ route: '/a', code: 200 }, 0.099],
    ];
    for (const [labels, v] of observations) {
      fast.observe(labels, v);
      reference.observe(labels, v);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain('h_seconds_bucket{le="+Inf",route="/b",code="404"} 1');
    fast.reset();
    expect(await ours.metrics()).toBe('# HELP h_seconds a histogram\n# TYPE h_seconds histogram\n');
  });
});
