#!/usr/bin/env node
// Failover under load. Starts a Redis Cluster (3 masters + 3 replicas) and a 3-node NATS cluster, then the
// agents, sessions and gateway processes (each given every seed / URL, as REDIS_CLUSTER_NODES and NATS_URL
// take them). `--concurrency` clients append transcript messages through the gateway, each to its own test
// session (spread over the cluster's slots), for `--seconds`; after `--kill-after` seconds one node dies
// (SIGKILL): `--kill redis` the master that owns the first session's slot, `--kill nats` the node the
// sessions service is connected to. Afterwards every transcript is read back: a message the API answered
// 201 for and that is not there is an acknowledged write lost.
// Usage: npm run build && node bench/failover.mjs --kill redis [--wait 1] [--replicas 1] [--seconds 12] [--kill-after 4]

import { startLocalNatsCluster, startLocalRedisCluster } from '@vab/testkit';
import { option, sendJson, startCore } from './processes.mjs';
import { root } from './lib/figures.mjs';

const KILL = option('kill', 'redis');
const WAIT = option('wait', 0);
const SECONDS = option('seconds', 12);
const KILL_AFTER = option('kill-after', 4);
const CONCURRENCY = option('concurrency', 24);
const REPLICAS = option('replicas', 1);

const redisCluster = await startLocalRedisCluster({ nodeTimeoutMs: 1000, replicas: REPLICAS });
const natsCluster = await startLocalNatsCluster({ size: 3 });
const env = {
  NATS_URL: natsCluster.urls,
  REDIS_CLUSTER_NODES: redisCluster.seeds,
  REDIS_WAIT_REPLICAS: String(WAIT),
  REDIS_WAIT_TIMEOUT_MS: '500',
  MAX_MESSAGES_PER_SESSION: '100000000',
};
const { url: base, procs } = await startCore(root, env, { REQUEST_TIMEOUT_MS: '5000' });

// one agent and one test session per client: their keys hash to slots all over the cluster
const targets = [];
for (let i = 0; i < CONCURRENCY; i++) {
  const agent = await sendJson('POST', `${base}/api/agents`, { name: `failover ${i}` });
  const session = await sendJson('POST', `${base}/api/agents/${agent.id}/test-sessions`, {
    sessionType: 'text',
  });
  targets.push({ agentId: agent.id, sessionId: session.id, acked: [] });
}

const victim =
  KILL === 'redis'
    ? redisCluster.masterOf(`ss:{${targets[0].agentId}}:ts`)
    : (natsCluster.nodes.find((n) => procs[1].startupOutput.includes(`:${n.port}"`)) ?? natsCluster.nodes[0]);
const results = [];
let killedAt = 0;
const t0 = performance.now();
const end = t0 + SECONDS * 1000;
setTimeout(() => {
  killedAt = performance.now();
  void victim.server.stop({ crash: true });
}, KILL_AFTER * 1000);

let seq = 0;
async function client(target) {
  while (performance.now() < end) {
    const content = `m${++seq}`;
    const started = performance.now();
    let status = 0;
    try {
      const res = await fetch(
        `${base}/api/agents/${target.agentId}/test-sessions/${target.sessionId}/messages`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ role: 'user', content, stepId: 's', timestamp: Date.now() }),
        },
      );
      status = res.status;
      await res.arrayBuffer();
    } catch {
      status = -1;
    }
    const done = performance.now();
    results.push({ status, started, ms: done - started, done, target });
    if (status === 201) target.acked.push(content);
    else await new Promise((r) => setTimeout(r, 20));
  }
}
await Promise.all(targets.map(client));

await (KILL === 'redis' ? redisCluster.settled(30_000) : natsCluster.routed(30_000)).catch(() => undefined);
let lost = 0;
let acked = 0;
for (const t of targets) {
  const stored = new Set(
    (await sendJson('GET', `${base}/api/agents/${t.agentId}/test-sessions/${t.sessionId}/messages`)).map(
      (m) => m.content,
    ),
  );
  acked += t.acked.length;
  lost += t.acked.filter((c) => !stored.has(c)).length;
}

// served again: the end of the last request that failed or took over a second, counted from the kill
const disrupted = results.filter((r) => r.done >= killedAt && (r.status !== 201 || r.ms > 1000));
const servedAgainMs = disrupted.length ? Math.round(Math.max(...disrupted.map((r) => r.done)) - killedAt) : 0;
const stillFailing = results.filter((r) => r.started >= end - 1000 && r.status !== 201).length;
const count = (pred) => results.filter(pred).length;
const slowest = Math.max(...results.map((r) => r.ms));
console.log(
  `# failover: kill ${KILL === 'redis' ? `the Redis master of a session's slot (port ${victim.port})` : `a NATS node (port ${victim.port})`}` +
    `, ${REPLICAS} replica(s) per master, REDIS_WAIT_REPLICAS=${WAIT}, ${CONCURRENCY} clients, ${SECONDS} s, kill at ${KILL_AFTER} s`,
);
console.log(
  JSON.stringify(
    {
      requests: results.length,
      answered201: count((r) => r.status === 201),
      answered503: count((r) => r.status === 503),
      answered504: count((r) => r.status === 504),
      otherFailures: count((r) => r.status !== 201 && r.status !== 503 && r.status !== 504),
      otherStatuses: [
        ...new Set(results.filter((r) => ![201, 503, 504].includes(r.status)).map((r) => r.status)),
      ],
      slowestMs: Math.round(slowest),
      p99Ms: Math.round(results.map((r) => r.ms).sort((a, b) => a - b)[Math.floor(results.length * 0.99)]),
      timeToServeAgainMs: servedAgainMs,
      failingInTheLastSecond: stillFailing,
      acknowledgedWrites: acked,
      acknowledgedWritesLost: lost,
    },
    null,
    2,
  ),
);
for (const line of procs.flatMap((p) => p.errorLines)) console.log(`> ${line.slice(0, 400)}`);
for (const p of procs) p.kill('SIGTERM');
await redisCluster.dispose();
await natsCluster.dispose();
process.exit(0);
