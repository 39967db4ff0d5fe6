import type { Metric, Registry } from 'prom-client';

/** One line of the exposition, as prom-client's registry reads a metric's `get()`. */
interface Value {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/** One series of a `FastHistogram`: one set of label values. */
export class FastSeries {
  /** Per bucket (not cumulative), the last one +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string | number>>,
    private readonly bounds: Float64Array,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]! += 1;
    this.sum += value;
    this.count += 1;
  }
}

/** A level of the label tree: each label's value leads to the next level, the last one to a series. */
type Level = Map<string | number, Level | FastSeries>;

/**
 * A histogram for the request path: the same exposition as prom-client's `Histogram` (a test compares the
 * two), but an observation is one map lookup per label, a bucket search and three additions. prom-client's
 * `observe` validates and hashes its label object on every call (0.31 µs against 0.02: bench/histogram-observe.mjs),
 * and a key string joined from the values (this class's first version) was a new string to hash on every
 * call; the values themselves (a route pattern, a subject, a status code) are the same strings and numbers
 * each time, hashed once. A scenario-1 request makes five observations across the gateway and the agents
 * service (docs/performance.md). Served by the registry it is registered in (`registerMetric`, prom-client's
 * own way to add a metric to a registry); label values must come bounded from the caller, and one label
 * always as a string or always as a number (`200` and `'200'` would be two series).
 */
export class FastHistogram<L extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly root: Level = new Map();
  /** Every series, in the order first seen (the exposition's order). */
  private readonly all: FastSeries[] = [];
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
    this.series(labels).observe(value);
  }

  /**
   * The series of these label values, to observe into without finding it again: a caller that sees the same
   * values over and over keeps it (the bus and Redis timings, by subject and by command).
   */
  series(labels: Record<L, string | number>): FastSeries {
    const names = this.opts.labelNames;
    const last = names.length - 1;
    let level = this.root;
    for (let i = 0; i < last; i++) {
      const v = labels[names[i]!];
      let next = level.get(v) as Level | undefined;
      if (next === undefined) {
        next = new Map();
        level.set(v, next);
      }
      level = next;
    }
    // the last label's value leads to the series (no labels: the one series, under '')
    const key = last < 0 ? '' : labels[names[last]!];
    let s = level.get(key) as FastSeries | undefined;
    if (s === undefined) {
      const own: Record<string, string | number> = {};
      for (const n of names) own[n] = labels[n];
      s = new FastSeries(own, this.bounds);
      level.set(key, s);
      this.all.push(s);
    }
    return s;
  }

  /**
   * Every series back to zero. They stay (prom-client's `reset` drops them) so that a series a caller kept
   * (`series`) still counts; Prometheus reads a drop to zero as a counter reset.
   */
  reset(): void {
    for (const s of this.all) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    const values: Value[] = [];
    for (const s of this.all) {
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
