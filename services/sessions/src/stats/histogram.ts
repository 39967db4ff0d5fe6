import {
  calledModel,
  METRIC_NAMES,
  USAGE_FIELDS,
  type AgentStats,
  type FigureStats,
  type MetricName,
  type SessionUsage,
  type TurnMetrics,
  type UsageTotals,
} from '@vab/contracts';

/**
 * A mergeable log-scale histogram kept as fields of a Redis hash: bucket b holds the values in
 * (FLOOR·G^(b-1), FLOOR·G^b] ms, so a percentile read from it is within G^½ (±1 %) of the exact one, and two
 * histograms merge by adding counts. A figure from 0.1 ms to an hour needs at most ~870 buckets; only the ones
 * a value fell in exist.
 */
const FLOOR_MS = 0.1;
const GROWTH = 1.02;
const LOG_GROWTH = Math.log(GROWTH);

export const bucketOf = (ms: number): number =>
  ms <= FLOOR_MS ? 0 : Math.max(1, Math.ceil(Math.log(ms / FLOOR_MS) / LOG_GROWTH - 1e-9));

/** The value a bucket stands for: the geometric middle of its bounds. */
export const valueOf = (bucket: number): number =>
  bucket === 0 ? FLOOR_MS : FLOOR_MS * Math.pow(GROWTH, bucket - 0.5);

/** What a stats hash holds, as field increments. */
export interface StatsDelta {
  /** Integer increments (HINCRBY). */
  incr: Record<string, number>;
  /** Float increments (HINCRBYFLOAT). */
  fincr: Record<string, number>;
  /** Maxima (kept if larger). */
  max: Record<string, number>;
}

export const emptyDelta = (): StatsDelta => ({ incr: {}, fincr: {}, max: {} });

/** One agent turn's figures; a turn that called no model (a literal line) is not counted. */
export function turnDelta(metrics: TurnMetrics): StatsDelta {
  const d = emptyDelta();
  if (!calledModel(metrics)) return d;
  d.incr.turns = 1;
  for (const name of METRIC_NAMES) {
    const v = metrics[name];
    if (v === undefined || !Number.isFinite(v)) continue;
    d.incr[`h:${name}:${bucketOf(v)}`] = 1;
    d.incr[`n:${name}`] = 1;
    d.fincr[`s:${name}`] = v;
    d.max[`m:${name}`] = v;
  }
  return d;
}

/** Provider and model names go into field names: `|` separates them, so it is replaced. */
const part = (s: string) => s.replaceAll('|', '/');

/** A closed session's usage and errors. */
export function closeDelta(usage: SessionUsage, errors: number, failedTurns = 0): StatsDelta {
  const d = emptyDelta();
  if (errors > 0) d.incr.errors = errors;
  if (failedTurns > 0) d.incr.failedTurns = failedTurns;
  for (const u of usage) {
    const prefix = `u:${u.kind}|${part(u.provider)}|${part(u.model)}|`;
    for (const f of USAGE_FIELDS) {
      const v = u[f];
      if (v === undefined || v === 0) continue;
      if (f === 'sttAudioSeconds') d.fincr[prefix + f] = v;
      else d.incr[prefix + f] = v;
    }
  }
  return d;
}

/** Adds one stats hash (as HGETALL returns it) into another: counts and sums add, maxima take the larger. */
export function mergeInto(into: Map<string, number>, hash: Record<string, string>): void {
  for (const [field, raw] of Object.entries(hash)) {
    const v = Number(raw);
    if (!Number.isFinite(v)) continue;
    const had = into.get(field);
    if (field.startsWith('m:')) into.set(field, had === undefined ? v : Math.max(had, v));
    else into.set(field, (had ?? 0) + v);
  }
}

function percentile(buckets: [number, number][], total: number, q: number): number {
  // nearest rank: the smallest value with at least q of the values at or below it
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (const [b, n] of buckets) {
    seen += n;
    if (seen >= rank) return valueOf(b);
  }
  return valueOf(buckets[buckets.length - 1]![0]);
}

const round = (v: number) => Math.round(v * 100) / 100;

/** The stats a merged hash says. */
export function statsOf(
  fields: Map<string, number>,
  head: Pick<AgentStats, 'agentId' | 'version' | 'since'>,
): AgentStats {
  const figures: AgentStats['figures'] = {};
  for (const name of METRIC_NAMES) {
    const count = fields.get(`n:${name}`) ?? 0;
    if (count === 0) continue;
    const buckets: [number, number][] = [];
    const prefix = `h:${name}:`;
    for (const [f, n] of fields)
      if (f.startsWith(prefix) && n > 0) buckets.push([Number(f.slice(prefix.length)), n]);
    buckets.sort((a, b) => a[0] - b[0]);
    const total = buckets.reduce((s, [, n]) => s + n, 0);
    const fig: FigureStats = {
      count,
      p50: round(percentile(buckets, total, 0.5)),
      p90: round(percentile(buckets, total, 0.9)),
      p99: round(percentile(buckets, total, 0.99)),
      mean: round((fields.get(`s:${name}`) ?? 0) / count),
      max: round(fields.get(`m:${name}`) ?? 0),
    };
    figures[name as MetricName] = fig;
  }
  const usage = new Map<string, UsageTotals>();
  for (const [f, v] of fields) {
    if (!f.startsWith('u:')) continue;
    const [kind, provider, model, field] = f.slice(2).split('|') as [
      UsageTotals['kind'],
      string,
      string,
      string,
    ];
    const key = `${kind}|${provider}|${model}`;
    let u = usage.get(key);
    if (!u) {
      u = {
        kind,
        provider,
        model,
        promptTokens: 0,
        completionTokens: 0,
        cachedTokens: 0,
        ttsCharacters: 0,
        sttAudioSeconds: 0,
      };
      usage.set(key, u);
    }
    if ((USAGE_FIELDS as readonly string[]).includes(field)) u[field as (typeof USAGE_FIELDS)[number]] += v;
  }
  return {
    ...head,
    sessions: fields.get('sessions') ?? 0,
    turns: fields.get('turns') ?? 0,
    failedTurns: fields.get('failedTurns') ?? 0,
    errors: fields.get('errors') ?? 0,
    figures,
    usage: [...usage.values()].map((u) => ({ ...u, sttAudioSeconds: round(u.sttAudioSeconds) })),
  };
}
