import type { Metric, Registry } from 'prom-client';

/** One line of the exposition, as prom-client's registry reads a metric's `get()`. */
interface Value {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

interface Series {
  labels: Record<string, string | number>;
  /** Per bucket (not cumulative), the last one +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

/**
 * A histogram for the request path: the same exposition as prom-client's `Histogram` (a test compares the
 * two), but an observation is a bucket search and three additions on a series found by one string key.
 * prom-client's `observe` validates and hashes its label object on every call (~1.9 µs here, against
 * ~0.6 µs for this: bench/histogram-observe.mjs), and a scenario-1 request makes five observations across the gateway and the agents service
 * (docs/performance.md). Served by the registry it is registered in (`registerMetric`, prom-client's own way
 * to add a metric to a registry); label values must come bounded from the caller.
 */
export class FastHistogram<L extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();
  private readonly bounds: Float64Array;

  constructor(
    readonly opts: {
      name: string;
      help: string;
      labelNames: readonly L[];
      buckets: readonly number[];
      registers: Registry[];
    },
  ) {
    this.bounds = Float64Array.from(opts.buckets);
    for (const r of opts.registers) r.registerMetric(this as unknown as Metric);
  }

  get name(): string {
    return this.opts.name;
  }

  get help(): string {
    return this.opts.help;
  }

  observe(labels: Record<L, string | number>, value: number): void {
    if (!Number.isFinite(value)) return;
    let key = '';
    for (const n of this.opts.labelNames) key += `${labels[n]}\u0000`;
    let s = this.series.get(key);
    if (!s) {
      const own: Record<string, string | number> = {};
      for (const n of this.opts.labelNames) own[n] = labels[n];
      s = { labels: own, counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    s.counts[i]! += 1;
    s.sum += value;
    s.count += 1;
  }

  reset(): void {
    this.series.clear();
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    const values: Value[] = [];
    for (const s of this.series.values()) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        values.push({
          metricName: `${this.name}_bucket`,
          labels: { le: i < this.bounds.length ? this.bounds[i]! : '+Inf', ...s.labels },
          value: cumulative,
        });
      }
      values.push({ metricName: `${this.name}_sum`, labels: { ...s.labels }, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels: { ...s.labels }, value: s.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
