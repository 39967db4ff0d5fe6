// Shared by the benchmarks' scripts: where the builds are, and how their figures are computed and printed.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root, where the services' builds are (`services/<name>/dist`). */
export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The `p`th percentile (0–100) of `xs`, nearest rank (NaN for none): every benchmark's p50/p99. */
export const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** A figure in a printed table, one decimal; a dash for none. */
export const fmt = (x) => (Number.isFinite(x) ? x.toFixed(1) : '—');

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
