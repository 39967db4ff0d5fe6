#!/usr/bin/env node
// The microservice tax, measured: each scenario runs the real path and its baseline alternately (A B A B …)
// in one run, with autocannon (a separate process) at 50 connections, and prints req/s, p50/p99 and the
// ratio per pair with the median. Starts its own nats-server, redis-server and service processes.
// Usage: npm run build && node bench/run.mjs [--seconds 5] [--rounds 3]
import { join } from 'node:path';
import { freePort, startLocalNats, startLocalRedis } from '@vab/testkit';
import { autocannon, benchFlow, option, sendJson, startProcess } from './processes.mjs';
import { root } from './lib/figures.mjs';
import { Redis } from 'ioredis';
import { performance } from 'node:perf_hooks';

const SECONDS = option('seconds', 5);
const ROUNDS = option('rounds', 3);
const CONNECTIONS = 50;
const children = [];

async function start(file, env, ready) {
  const child = await startProcess(file, env, ready);
  children.push(child);
  return child;
}

/** This benchmark's load: 50 connections for SECONDS, unless said otherwise. */
const load = (url, opts = {}) => autocannon({ url, seconds: SECONDS, connections: CONNECTIONS, ...opts });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (n, d = 0) => Number(n).toFixed(d);

const nats = await startLocalNats();
const redisServer = await startLocalRedis();
const redis = new Redis(redisServer.url);
const env = { NATS_URL: nats.url, REDIS_URL: redisServer.url };
const gwPort = await freePort();
const monoPort = await freePort();
await start(join(root, 'services/agents/dist/main.js'), env, '"msg":"serving"');
// scenario 4 appends ~10,000/s to one session for seconds: above the default cap per session (20,000)
await start(
  join(root, 'services/sessions/dist/main.js'),
  { ...env, MAX_MESSAGES_PER_SESSION: '10000000' },
  '"msg":"serving"',
);
await start(
  join(root, 'services/gateway/dist/main.js'),
  {
    ...env,
    PORT: String(gwPort),
    LOG_LEVEL: 'info',
    RATE_LIMIT_MAX: '1000000000',
    BODY_LIMIT_BYTES: '4194304',
  },
  'gateway listening',
);
await start(join(root, 'bench/monolith.mjs'), { ...env, PORT: String(monoPort) }, 'monolith listening');
const edgePort = await freePort();
await start(
  join(root, 'bench/monolith.mjs'),
  { ...env, PORT: String(edgePort), EDGE: '1', RATE_LIMIT_MAX: '1000000000' },
  'monolith listening',
);
const monoEdge = `http://127.0.0.1:${edgePort}`;
const gw = `http://127.0.0.1:${gwPort}`;
const mono = `http://127.0.0.1:${monoPort}`;

const flow = benchFlow();
const agent = await sendJson('POST', `${gw}/api/agents`, { name: 'Bench', flow });

console.log(
  `# microservice tax — ${new Date().toISOString().slice(0, 10)}, node ${process.version}, autocannon ${CONNECTIONS} connections, ${SECONDS} s per run, ${ROUNDS} rounds A/B`,
);
console.log(
  '\n## 1. GET /api/agents/:id (20-node flow): gateway → NATS → agents vs the same handler in one Fastify process',
);
console.log(
  'Baselines: the same handler in one Fastify process, bare (as the issue defines it), and behind the gateway’s own HTTP edge (request ids, access log, security headers, CORS, rate limit: `createEdge`), which differs from the gateway path by the bus alone.\n',
);
console.log(
  '| round | gateway req/s | p50 | p99 | monolith req/s | p50 | p99 | ratio | monolith + edge req/s | p50 | p99 | ratio |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
const path = `/api/agents/${agent.id}`;
// JIT warm-up of every process, so round 1 is not a measure of compilation
for (const base of [gw, mono, monoEdge]) await load(`${base}${path}`, { seconds: 2 });
const ratios = [];
const edgeRatios = [];
for (let r = 1; r <= ROUNDS; r++) {
  const a = await load(`${gw}${path}`);
  const b = await load(`${mono}${path}`);
  const c = await load(`${monoEdge}${path}`);
  ratios.push(a.rps / b.rps);
  edgeRatios.push(a.rps / c.rps);
  console.log(
    `| ${r} | ${fmt(a.rps)} | ${a.p50} | ${a.p99} | ${fmt(b.rps)} | ${b.p50} | ${b.p99} | ${fmt(a.rps / b.rps, 2)} | ${fmt(c.rps)} | ${c.p50} | ${c.p99} | ${fmt(a.rps / c.rps, 2)} |`,
  );
}
console.log(
  `median ratio gateway/monolith: **${fmt(median(ratios), 2)}**; gateway/(monolith + edge): **${fmt(median(edgeRatios), 2)}**`,
);

console.log('\n## 3. PATCH /api/agents/:id with a 100 KB flow');
const big = {
  ...flow,
  nodes: [...flow.nodes, { id: 'blob', nodeType: 'note', text: 'x'.repeat(100 * 1024) }],
};
const patchBody = JSON.stringify({ flow: big });
const p = await load(`${gw}/api/agents/${agent.id}`, { method: 'PATCH', body: patchBody });
console.log(
  `unchanged 100 KB saves: ${fmt(p.rps)} saves/s, p50 ${p.p50} ms, p99 ${p.p99} ms, non-2xx ${p.non2xx}`,
);
const mem = async () => Number((await redis.info('memory')).match(/used_memory:(\d+)/)[1]);
const saveMany = async (id, changing) => {
  const before = await mem();
  for (let i = 0; i < 1000; i++) {
    const f = changing ? { ...big, nodes: [...big.nodes, { id: `n${i}`, nodeType: 'note' }] } : big;
    await sendJson('PATCH', `${gw}/api/agents/${id}`, { flow: f });
  }
  return (await mem()) - before;
};
const a1 = await sendJson('POST', `${gw}/api/agents`, { name: 'Same', flow: big });
const a2 = await sendJson('POST', `${gw}/api/agents`, { name: 'Changing', flow: big });
const same = await saveMany(a1.id, false);
const changing = await saveMany(a2.id, true);
console.log(
  `Redis memory after 1,000 saves: unchanged flow +${fmt(same / 1000)} B per save; changing flow +${fmt(changing / 1000)} B per save`,
);

console.log('\n## 4. Transcript messages');
const session = await sendJson('POST', `${gw}/api/agents/${agent.id}/test-sessions`, {
  sessionType: 'text',
});
const msg = JSON.stringify({
  role: 'user',
  content: 'I would like to book an appointment for Tuesday morning, please.',
  stepId: 'talk',
  timestamp: Date.now(),
});
const m = await load(`${gw}/api/agents/${agent.id}/test-sessions/${session.id}/messages`, {
  method: 'POST',
  body: msg,
});
console.log(`appends: ${fmt(m.rps)} /s, p50 ${m.p50} ms, p99 ${m.p99} ms, non-2xx ${m.non2xx}`);
const s2 = await sendJson('POST', `${gw}/api/agents/${agent.id}/test-sessions`, { sessionType: 'text' });
for (let i = 0; i < 10_000; i += 500) {
  await Promise.all(
    Array.from({ length: 500 }, (_, j) =>
      sendJson('POST', `${gw}/api/agents/${agent.id}/test-sessions/${s2.id}/messages`, {
        role: 'user',
        content: `message ${i + j} of the transcript`,
        stepId: 'talk',
        timestamp: Date.now(),
      }),
    ),
  );
}
const reads = [];
for (let i = 0; i < 10; i++) {
  const t0 = performance.now();
  const res = await fetch(`${gw}/api/agents/${agent.id}/test-sessions/${s2.id}/messages`);
  const n = (await res.json()).length;
  reads.push(performance.now() - t0);
  if (n !== 10_000) throw new Error(`read ${n} messages`);
}
console.log(`reading a 10,000-message transcript: p50 ${fmt(median(reads), 1)} ms over 10 reads`);

for (const c of children) c.kill('SIGTERM');
await redis.quit();
await new Promise((r) => setTimeout(r, 500));
await nats.dispose();
await redisServer.dispose();
process.exit(0);
