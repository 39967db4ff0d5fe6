import { describe, expect, it } from 'vitest';
import { bucketOf, closeDelta, mergeInto, statsOf, turnDelta, valueOf } from './histogram.js';

/** A hash as Redis would hold it after these deltas (HINCRBY, HINCRBYFLOAT, max). */
function applied(deltas: ReturnType<typeof turnDelta>[]): Record<string, string> {
  const h = new Map<string, number>();
  for (const d of deltas) {
    for (const [f, n] of Object.entries(d.incr)) h.set(f, (h.get(f) ?? 0) + n);
    for (const [f, n] of Object.entries(d.fincr)) h.set(f, (h.get(f) ?? 0) + n);
    for (const [f, n] of Object.entries(d.max)) h.set(f, Math.max(h.get(f) ?? -Infinity, n));
  }
  return Object.fromEntries([...h].map(([k, v]) => [k, String(v)]));
}

const nearestRank = (values: number[], q: number) => {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(q * s.length) - 1)]!;
};

describe('mergeable histograms', () => {
  it('puts each value in a bucket whose middle is within 1 % of it', () => {
    for (const v of [0.5, 1, 7.3, 99, 1234.5, 60_000]) {
      expect(Math.abs(valueOf(bucketOf(v)) - v) / v).toBeLessThan(0.011);
    }
  });

  it('answers p50/p90/p99 within 2 % of a brute-force computation, merged from two halves', () => {
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const values = Array.from({ length: 5000 }, () => Math.exp(random() * 7) * (1 + random()));
    const a = applied(values.slice(0, 2500).map((v) => turnDelta({ turnMs: v, llmTtftMs: 1 })));
    const b = applied(values.slice(2500).map((v) => turnDelta({ turnMs: v, llmTtftMs: 1 })));
    const merged = new Map<string, number>();
    mergeInto(merged, a);
    mergeInto(merged, b);
    const stats = statsOf(merged, { agentId: 'a', version: 1, since: null });
    const fig = stats.figures.turnMs!;
    expect(fig.count).toBe(5000);
    expect(stats.turns).toBe(5000);
    for (const [q, got] of [
      [0.5, fig.p50],
      [0.9, fig.p90],
      [0.99, fig.p99],
    ] as const) {
      const exact = nearestRank(values, q);
      expect(Math.abs(got - exact) / exact).toBeLessThanOrEqual(0.02);
    }
    expect(fig.max).toBeCloseTo(Math.max(...values), 1);
    expect(fig.mean).toBeCloseTo(values.reduce((s, v) => s + v, 0) / values.length, 1);
  });

  it('sums usage per provider and model, and counts errors', () => {
    const merged = new Map<string, number>();
    for (let i = 0; i < 3; i++) {
      mergeInto(
        merged,
        applied([
          closeDelta(
            [{ kind: 'llm', provider: 'openai', model: 'm|x', promptTokens: 10, completionTokens: 2 }],
            1,
          ),
        ]),
      );
    }
    const stats = statsOf(merged, { agentId: 'a', version: null, since: 0 });
    expect(stats.errors).toBe(3);
    expect(stats.usage).toEqual([
      {
        kind: 'llm',
        provider: 'openai',
        model: 'm/x',
        promptTokens: 30,
        completionTokens: 6,
        cachedTokens: 0,
        ttsCharacters: 0,
        sttAudioSeconds: 0,
      },
    ]);
  });
});

describe('a turn that called no model', () => {
  it('is no turn of the stats: a literal greeting of 1 ms does not pull the median down', () => {
    const model = [400, 500, 600].map((v) => turnDelta({ turnMs: v, llmTtftMs: v / 2 }));
    const literal = [1, 1, 1, 1].map((v) => turnDelta({ turnMs: v }));
    const merged = new Map<string, number>();
    mergeInto(merged, applied([...model, ...literal]));
    const stats = statsOf(merged, { agentId: 'a', version: 1, since: null });
    expect(stats.turns).toBe(3);
    expect(stats.figures.turnMs).toMatchObject({ count: 3, max: 600 });
    expect(stats.figures.turnMs!.p50).toBeGreaterThan(450);
  });
});
