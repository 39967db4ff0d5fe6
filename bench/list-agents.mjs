#!/usr/bin/env node
// GET /api/agents latency as the number of stored agents grows (issue 7, scenario 2), through the real path:
// HTTP -> gateway -> NATS -> agents service -> Redis, all in this process on their own servers.
// Also times the service's own work (AgentStore.list) to separate it from transport.
// Usage: npm run build && node bench/list-agents.mjs [sizes...]   (default: 1000 10000 50000)
import { connectNats } from '@vab/bus';
import { AgentStore, startAgentsService } from '@vab/agents';
import { createLogger } from '@vab/service-kit';
import { buildGateway } from '@vab/gateway';
import { createRedis } from '@vab/storage';
import { startLocalNats, startLocalRedis } from '@vab/testkit';
import { performance } from 'node:perf_hooks';

const sizes = process.argv.slice(2).map(Number).filter(Boolean);
const SIZES = sizes.length ? sizes : [1000, 10000, 50000];
const RUNS = 15;
const log = createLogger('bench', 'warn');
const pct = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

const nats = await startLocalNats();
const redisServer = await startLocalRedis();
const redis = createRedis(redisServer.url, log, { name: 'bench' });
const nc = await connectNats({ url: nats.url, name: 'agents', service: 'agents' }, log);
const served = startAgentsService({ nc, redis: createRedis(redisServer.url, log, { name: 'agents' }), log });
await served.ready;
const gwNc = await connectNats({ url: nats.url, name: 'gateway', service: 'gateway' }, log);
const app = await buildGateway({
  nc: gwNc,
  log,
  config: { BODY_LIMIT_BYTES: 1 << 20, REQUEST_TIMEOUT_MS: 30000, READY_TIMEOUT_MS: 1000 },
});
await app.listen({ host: '127.0.0.1', port: 0 });
const base = `http://127.0.0.1:${app.server.address().port}`;
const store = new AgentStore(redis);

console.log(
  `machine: ${(await import('node:os')).cpus().length} vCPU, node ${process.version}; ${RUNS} runs per size`,
);
console.log('| agents | HTTP p50 ms | HTTP p99 ms | service list() p50 ms | reply bytes |');
console.log('|---|---|---|---|---|');
let stored = 0;
for (const n of SIZES) {
  while (stored < n) {
    const batch = Math.min(500, n - stored);
    await Promise.all(
      Array.from({ length: batch }, (_, i) => store.create(`Agent ${stored + i}`, { nodes: [], edges: [] })),
    );
    stored += batch;
  }
  const http = [];
  const svc = [];
  let bytes = 0;
  for (let i = 0; i < RUNS; i++) {
    let t = performance.now();
    const res = await fetch(`${base}/api/agents`);
    const body = await res.text();
    http.push(performance.now() - t);
    bytes = body.length;
    t = performance.now();
    const list = await store.list();
    svc.push(performance.now() - t);
    const listed = JSON.parse(list.json).length;
    const served = JSON.parse(body).length;
    if (listed !== n || served !== n) throw new Error(`expected ${n} agents, listed ${listed}/${served}`);
  }
  console.log(
    `| ${n} | ${pct(http, 50).toFixed(1)} | ${pct(http, 99).toFixed(1)} | ${pct(svc, 50).toFixed(1)} | ${bytes} |`,
  );
}

await app.close();
await gwNc.close();
await served.stop(1000);
await nc.close();
await redis.quit();
await nats.dispose();
await redisServer.dispose();
process.exit(0);
