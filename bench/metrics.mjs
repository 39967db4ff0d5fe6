#!/usr/bin/env node
// What a Prometheus scrape of a busy gateway costs: the agents and sessions services and a gateway (this
// checkout's build) on their own nats-server and redis-server; autocannon (50 connections, its own process)
// loads GET /api/agents/:id while this process scrapes the gateway's /metrics every `--every` ms, then the
// same scrapes with no load. Prints each phase's scrape time p50/p99/max and the size of the text, and the
// agents service's /metrics (METRICS_PORT) under the same load.
// Usage: npm run build && node bench/metrics.mjs [--seconds 10] [--every 100]
import { join } from 'node:path';
import { freePort, startLocalNats, startLocalRedis } from '@vab/testkit';
import { autocannon, benchFlow, option, sendJson, startProcess } from './processes.mjs';
import { root } from './lib/figures.mjs';

const SECONDS = option('seconds', 10);
const EVERY_MS = option('every', 100);

const nats = await startLocalNats();
const redis = await startLocalRedis();
const agentsMetricsPort = await freePort();
const port = await freePort();
const env = { NATS_URL: nats.url, REDIS_URL: redis.url, LOG_LEVEL: 'info' };
const agents = await startProcess(
  join(root, 'services/agents/dist/main.js'),
  { ...env, METRICS_PORT: String(agentsMetricsPort) },
  '"msg":"serving"',
);
const gateway = await startProcess(
  join(root, 'services/gateway/dist/main.js'),
  { ...env, PORT: String(port), RATE_LIMIT_MAX: '1000000000' },
  'gateway listening',
);
const url = `http://127.0.0.1:${port}`;
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

/** The gateway's own account of its /metrics answers so far: count and seconds (its HTTP histogram). */
async function servedScrapes() {
  const text = await (await fetch(`${url}/metrics`)).text();
  const sum = (kind) =>
    [
      ...text.matchAll(
        new RegExp(
          `^http_server_request_duration_seconds_${kind}\\{http_route="/metrics"[^}]*\\} (\\S+)$`,
          'gm',
        ),
      ),
    ]
      .map((m) => Number(m[1]))
      .reduce((a, b) => a + b, 0);
  return { count: sum('count'), seconds: sum('sum') };
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const row = (name, load, r, served) =>
  console.log(
    `| ${name} | ${load} | ${r.ms.length} | ${pct(r.ms, 0.5).toFixed(2)} | ${pct(r.ms, 0.99).toFixed(2)} | ` +
      `${Math.max(...r.ms).toFixed(2)} | ${served ?? '-'} | ${(r.bytes / 1024).toFixed(1)} |`,
  );
/** Mean ms the gateway itself spent on the /metrics answers between two readings. */
const servedMs = (a, b) => (((b.seconds - a.seconds) / (b.count - a.count)) * 1000).toFixed(2);

// warm-up: every route's series exists, JIT warm
await autocannon({ url: target, seconds: 2 });

console.log(`# A scrape of /metrics — ${SECONDS} s phases, one scrape every ${EVERY_MS} ms`);
console.log(
  '| endpoint | load | scrapes | p50 ms | p99 ms | max ms | gateway-side mean ms (its own histogram) | KB |',
);
console.log('|---|---|---|---|---|---|---|---|');
for (const [name, metricsUrl] of [
  ['gateway /metrics', `${url}/metrics`],
  ['agents :METRICS_PORT/metrics', `http://127.0.0.1:${agentsMetricsPort}/metrics`],
]) {
  const gw = name.startsWith('gateway');
  let done = false;
  const before = gw ? await servedScrapes() : undefined;
  const loadRun = autocannon({ url: target, seconds: SECONDS, pids: [gateway.pid, agents.pid] }).then((r) => {
    done = true;
    return r;
  });
  const busy = await scrapes(metricsUrl, () => done);
  const r = await loadRun;
  const after = gw ? await servedScrapes() : undefined;
  row(
    name,
    `autocannon 50 conn., ${r.rps.toFixed(0)} req/s (request p50 ${r.p50} ms, p99 ${r.p99} ms)`,
    busy,
    gw ? servedMs(before, after) : undefined,
  );
  const idleUntil = Date.now() + SECONDS * 500;
  const idle = await scrapes(metricsUrl, () => Date.now() > idleUntil);
  row(name, 'idle', idle, gw ? servedMs(after, await servedScrapes()) : undefined);
}
process.exit(0);
