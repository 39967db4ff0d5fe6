#!/usr/bin/env node
// Same-run A/B of the gateway path between two builds of this repository: this checkout (B) and another one
// (A, `--base <dir>`, e.g. a `git worktree` of an earlier commit, built). Each gets its own nats-server,
// redis-server, agents (and sessions) and gateway processes; autocannon (50 connections, its own process)
// runs against them alternately, A B A B …, so both meet the same machine. Prints each round and the median
// ratio B/A. Scenario 1 by default (GET /api/agents/:id of a 20-node agent); `--append` for scenario 4
// (POST …/messages).
// `--env-a K=V,…` / `--env-b K=V,…` add variables to one side's processes (an option measured against
// itself: `--base .` with a different setting on each side). `--cluster-a` / `--cluster-b` run that side on
// a Redis Cluster (3 masters + 3 replicas) and a 3-node NATS cluster instead of one server of each (its CPU
// figure then counts every nats-server; Redis is counted on neither side). With one Redis on both sides,
// each process's CPU per request is also read against redis-server's (same work per request in both builds):
// a machine-wide slowdown in one round moves both and cancels out.
// Usage: npm run build && node bench/ab.mjs --base ../base [--seconds 5] [--rounds 5] [--append]
import { resolve } from 'node:path';
import { startLocalNats, startLocalNatsCluster, startLocalRedis, startLocalRedisCluster } from '@vab/testkit';
import { autocannon, benchFlow, envOf, flag, option, sendJson, startCore } from './processes.mjs';
import { root as here } from './lib/figures.mjs';

const base = option('base');
if (!base) {
  console.error(
    'usage: node bench/ab.mjs --base <another built checkout> [--seconds 5] [--rounds 5] [--append]',
  );
  process.exit(2);
}
const SECONDS = option('seconds', 5);
const ROUNDS = option('rounds', 5);
const APPEND = flag('append');

/** One NATS and one Redis, or a cluster of each: the environment the services get, and the NATS pids. */
async function servers(cluster) {
  if (!cluster) {
    const nats = await startLocalNats();
    const redis = await startLocalRedis();
    return {
      env: { NATS_URL: nats.url, REDIS_URL: redis.url },
      natsPids: [nats.child.pid],
      redisPid: redis.child.pid,
    };
  }
  const nats = await startLocalNatsCluster({ size: 3 });
  const redis = await startLocalRedisCluster();
  return {
    env: { NATS_URL: nats.urls, REDIS_CLUSTER_NODES: redis.seeds },
    natsPids: nats.nodes.map((n) => n.server.child.pid),
  };
}

async function stack(root, extraEnv, cluster) {
  const { env: serverEnv, natsPids, redisPid } = await servers(cluster);
  const env = {
    ...serverEnv,
    MAX_MESSAGES_PER_SESSION: '100000000',
    ...extraEnv,
  };
  const { url, agents, sessions, gateway } = await startCore(root, env, { BODY_LIMIT_BYTES: '4194304' });
  // the processes whose CPU a request costs: the gateway, the service behind it, and the bus
  const pids = [gateway.pid, (APPEND ? sessions : agents).pid, ...natsPids];
  // redis-server does the same work per request in both builds (one script): its CPU per request says how
  // fast the machine ran during that round, so the others can be read against it (one server only)
  const reference = redisPid === undefined ? [] : [redisPid];
  const agent = await sendJson('POST', `${url}/api/agents`, { name: 'Bench', flow: benchFlow() });
  if (!APPEND) return { pids, reference, url: `${url}/api/agents/${agent.id}` };
  const session = await sendJson('POST', `${url}/api/agents/${agent.id}/test-sessions`, {
    sessionType: 'text',
  });
  return {
    pids,
    reference,
    url: `${url}/api/agents/${agent.id}/test-sessions/${session.id}/messages`,
    body: JSON.stringify({ role: 'user', content: 'hello there', stepId: 'start', timestamp: Date.now() }),
  };
}

/** A run; `cpu` the path's CPU µs per request, `redis` redis-server's (the machine's pace), when counted. */
const load = async ({ url, body, pids, reference }, seconds = SECONDS) => {
  const r = await autocannon({
    url,
    seconds,
    pids: [...pids, ...reference],
    ...(body ? { method: 'POST', body } : {}),
  });
  const us = r.us.slice(0, pids.length);
  const redis = reference.length ? r.us[pids.length] : undefined;
  return { ...r, us, cpu: us.reduce((x, y) => x + y, 0), redis };
};

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const a = await stack(resolve(base), envOf(option('env-a')), flag('cluster-a'));
const b = await stack(here, envOf(option('env-b')), flag('cluster-b'));
console.log(
  `# A/B ${APPEND ? 'scenario 4 (appends)' : 'scenario 1 (GET /api/agents/:id)'} — A ${resolve(base)}, B ${here}; ` +
    `${SECONDS} s per run, ${ROUNDS} rounds, warm-up first` +
    (option('env-a') || option('env-b')
      ? `; env A: ${option('env-a') ?? '-'}, B: ${option('env-b') ?? '-'}`
      : '') +
    (flag('cluster-a') ? '; A on clusters' : '') +
    (flag('cluster-b') ? '; B on clusters' : ''),
);
await load(a, 2);
await load(b, 2);
const paced = a.reference.length > 0 && b.reference.length > 0;
console.log(
  '| round | A req/s | A p50/p99 ms | A µs/req (gateway+service+nats) | B req/s | B p50/p99 ms | B µs/req | B/A req/s | B/A µs |' +
    (paced ? ' B/A µs against redis |' : ''),
);
console.log('|---|---|---|---|---|---|---|---|---|' + (paced ? '---|' : ''));
const ratios = [];
const cpuRatios = [];
/** Per round: B/A of each process's CPU per request, each side divided by its redis-server's first. */
const pacedRatios = [];
const lat = { a50: [], a99: [], b50: [], b99: [] };
const split = (r) => `${r.cpu.toFixed(1)} (${r.us.map((u) => u.toFixed(1)).join('+')})`;
for (let i = 1; i <= ROUNDS; i++) {
  // alternate which goes first, so neither always meets a warmer machine
  let ra;
  let rb;
  if (i % 2) {
    ra = await load(a);
    rb = await load(b);
  } else {
    rb = await load(b);
    ra = await load(a);
  }
  ratios.push(rb.rps / ra.rps);
  cpuRatios.push(rb.cpu / ra.cpu);
  if (paced) {
    const per = (r) => [...r.us, r.cpu].map((u) => u / r.redis);
    const pa = per(ra);
    pacedRatios.push(per(rb).map((x, j) => x / pa[j]));
  }
  lat.a50.push(ra.p50);
  lat.a99.push(ra.p99);
  lat.b50.push(rb.p50);
  lat.b99.push(rb.p99);
  console.log(
    `| ${i} | ${ra.rps.toFixed(0)} | ${ra.p50}/${ra.p99} | ${split(ra)} | ${rb.rps.toFixed(0)} | ${rb.p50}/${rb.p99} | ${split(rb)} | ` +
      `${ratios.at(-1).toFixed(3)} | ${cpuRatios.at(-1).toFixed(3)} |` +
      (paced ? ` ${pacedRatios.at(-1).at(-1).toFixed(3)} |` : ''),
  );
}
const range = (xs) => `${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}`;
console.log(`\nmedian B/A req/s: ${median(ratios).toFixed(3)} (rounds ${range(ratios)})`);
console.log(`median B/A CPU per request: ${median(cpuRatios).toFixed(3)} (rounds ${range(cpuRatios)})`);
if (paced) {
  // machine-wide swings (another tenant, the clock) move redis-server as much as the rest; this does not
  const of = (j) => pacedRatios.map((r) => r[j]);
  const names = ['gateway', APPEND ? 'sessions' : 'agents', 'nats-server'];
  console.log(
    `median B/A CPU per request against redis-server's: path ${median(of(names.length)).toFixed(3)} ` +
      `(rounds ${range(of(names.length))}); ` +
      names.map((n, j) => `${n} ${median(of(j)).toFixed(3)}`).join(', '),
  );
}
console.log(
  `latency, median of the rounds (range): A p50 ${median(lat.a50)} ms (${Math.min(...lat.a50)}–${Math.max(...lat.a50)}), ` +
    `p99 ${median(lat.a99)} ms (${Math.min(...lat.a99)}–${Math.max(...lat.a99)}); ` +
    `B p50 ${median(lat.b50)} ms (${Math.min(...lat.b50)}–${Math.max(...lat.b50)}), ` +
    `p99 ${median(lat.b99)} ms (${Math.min(...lat.b99)}–${Math.max(...lat.b99)})`,
);
process.exit(0);
