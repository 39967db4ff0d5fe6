#!/usr/bin/env node
// One histogram observation with two labels, prom-client's `Histogram.observe` against the service kit's
// `FastHistogram` (what the request-path histograms use): µs per observation, median of the rounds.
// Usage: npm run build && node bench/histogram-observe.mjs [--observations 2000000] [--rounds 5]
import { FastHistogram } from '@vab/service-kit';
import { Histogram, Registry } from 'prom-client';
import { option } from './processes.mjs';

const N = option('observations', 2_000_000);
const ROUNDS = option('rounds', 5);
const opts = {
  name: 'bench_seconds',
  help: 'bench',
  labelNames: ['subject', 'outcome'],
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
};
const ways = {
  'prom-client Histogram': new Histogram({ ...opts, registers: [new Registry()] }),
  FastHistogram: new FastHistogram({ ...opts, registers: [new Registry()] }),
};
const results = Object.fromEntries(Object.keys(ways).map((w) => [w, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, h] of Object.entries(ways)) {
    const t0 = performance.now();
    for (let i = 0; i < N; i++) h.observe({ subject: 'agents.get', outcome: 'ok' }, 0.0003);
    results[name].push(((performance.now() - t0) * 1000) / N);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`# One observation, two labels (${N} per round, ${ROUNDS} rounds)`);
console.log('| histogram | median µs | rounds |');
console.log('|---|---|---|');
for (const [name, xs] of Object.entries(results)) {
  console.log(`| ${name} | ${median(xs).toFixed(3)} | ${xs.map((x) => x.toFixed(3)).join(', ')} |`);
}
