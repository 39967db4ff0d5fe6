#!/usr/bin/env node
// What a Prometheus scrape of a busy gateway costs: the agents and sessions services and a gateway (this
// checkout's build) on their own nats-server and redis-server; autocannon (50 connections, its own process)
// loads GET /api/agents/:id while this process scrapes the gateway's /metrics every `--every` ms, then the
// same scrapes with no load. Prints each phase's scrape time p50/p99/max and the size of the text, and the
// agents service's /metrics (METRICS_PORT) under the same load.
// Usage: npm run build && node bench/metrics.mjs [--seconds 10] [--every 100]
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startLocalNats, startLocalRedis } from '@vab/testkit';
import { autocannon, benchFlow, option, sendJson, startCore } from './processes.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SECONDS = option('seconds', 10);
const EVERY_MS = option('every', 100);

const nats = await startLocalNats();
const redis = await startLocalRedis();
const agentsMetricsPort = await freePort();
const { url, agents, gateway } = await startCore(root, {
  NATS_URL: nats.url,
  REDIS_URL: redis.url,
  METRICS_PORT: String(agentsMetricsPort),
});
const agent = await sendJson('POST', `${url}/api/agents`, { name: 'Bench', flow: benchFlow() });
const target = `${url}/api/agents/${agent.id}`;

/** Scrapes `metricsUrl` every EVERY_MS until `until()` says stop; each scrape's ms and bytes. */
async function scrapes(metricsUrl, until) {
  const ms = [];
  let bytes = 0;
  while (!until()) {
    const t0 = performance.now();
    const res = await fetch(metricsUrl);
    const text = await res.text();
    ms.push(performance.now() - t0);
    bytes = text.length;
    if (!res.ok) throw new Error(`${metricsUrl}: ${res.status}`);
    await new Promise((r) => setTimeout(r, EVERY_MS));
  }
  return { ms, bytes };
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const row = (name, load, r) =>
  console.log(
    `| ${name} | ${load} | ${r.ms.length} | ${pct(r.ms, 0.5).toFixed(2)} | ${pct(r.ms, 0.99).toFixed(2)} | ` +
      `${Math.max(...r.ms).toFixed(2)} | ${(r.bytes / 1024).toFixed(1)} |`,
  );

// warm-up: every route's series exists, JIT warm
await autocannon({ url: target, seconds: 2 });

console.log(`# A scrape of /metrics — ${SECONDS} s phases, one scrape every ${EVERY_MS} ms`);
console.log('| endpoint | load | scrapes | p50 ms | p99 ms | max ms | KB |');
console.log('|---|---|---|---|---|---|---|');
for (const [name, metricsUrl] of [
  ['gateway /metrics', `${url}/metrics`],
  ['agents :METRICS_PORT/metrics', `http://127.0.0.1:${agentsMetricsPort}/metrics`],
]) {
  let done = false;
  const loadRun = autocannon({ url: target, seconds: SECONDS, pids: [gateway.pid, agents.pid] }).then((r) => {
    done = true;
    return r;
  });
  const busy = await scrapes(metricsUrl, () => done);
  const r = await loadRun;
  row(name, `autocannon 50 conn., ${r.rps.toFixed(0)} req/s (p99 ${r.p99} ms)`, busy);
  const idleUntil = Date.now() + SECONDS * 500;
  row(name, 'idle', await scrapes(metricsUrl, () => Date.now() > idleUntil));
}
process.exit(0);
