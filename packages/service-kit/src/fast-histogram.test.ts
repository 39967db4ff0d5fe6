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
  });

  it('counts into a kept series as into its labels, and keeps it counting across a reset (from zero)', async () => {
    const registry = new Registry();
    const fast = new FastHistogram({
      name: 'h_seconds',
      help: 'a histogram',
      labelNames: ['route', 'code'] as const,
      buckets: [0.01, 0.1, 1],
      registers: [registry],
    });
    const kept = fast.series({ route: '/a', code: 200 });
    expect(fast.series({ route: '/a', code: 200 })).toBe(kept);
    kept.observe(0.05);
    fast.observe({ route: '/a', code: 200 }, 0.5);
    kept.observe(Number.NaN);
    expect(await registry.metrics()).toContain('h_seconds_count{route="/a",code="200"} 2');
    expect(await registry.metrics()).toContain('h_seconds_bucket{le="0.1",route="/a",code="200"} 1');
    fast.reset();
    expect(await registry.metrics()).toContain('h_seconds_count{route="/a",code="200"} 0');
    kept.observe(2);
    const text = await registry.metrics();
    expect(text).toContain('h_seconds_count{route="/a",code="200"} 1');
    expect(text).toContain('h_seconds_sum{route="/a",code="200"} 2');
    expect(text).toContain('h_seconds_bucket{le="1",route="/a",code="200"} 0');
  });

  it('writes the same as prom-client for a histogram without labels, and for three labels', async () => {
    for (const labelNames of [[], ['route', 'method', 'code']] as const) {
      const ours = new Registry();
      const theirs = new Registry();
      const opts = { name: 'h_seconds', help: 'a histogram', buckets: [0.01, 0.1, 1] };
      const fast = new FastHistogram({ ...opts, labelNames, registers: [ours] });
      const reference = new Histogram({ ...opts, labelNames: [...labelNames], registers: [theirs] });
      const labels = [
        { route: '/a', method: 'GET', code: 200 },
        { route: '/a', method: 'PUT', code: 200 },
        { route: '/a', method: 'GET', code: 404 },
        { route: '/b', method: 'GET', code: 200 },
        { route: '/a', method: 'GET', code: 200 },
      ];
      for (const [i, l] of labels.entries()) {
        const own = Object.fromEntries(labelNames.map((n) => [n, l[n]]));
        fast.observe(own as never, i / 10);
        reference.observe(own, i / 10);
      }
      expect(await ours.metrics()).toBe(await theirs.metrics());
    }
  });
});
