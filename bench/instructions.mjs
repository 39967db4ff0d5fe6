#!/usr/bin/env node
// Same-run A/B of scenario 1 (GET /api/agents/:id of a 20-node agent) by instructions, not seconds: one
// process of the path (the gateway, or the agents service behind it) runs under valgrind's callgrind, the
// other one normally; after a warm-up long enough for V8 to have compiled the hot path, its counters are
// zeroed, a fixed number of requests is sent (10 at a time), and the instructions it executed (every thread:
// JavaScript, V8, the garbage collector, libuv) are divided by the requests. Wall-clock A/Bs on a shared
// 2-vCPU machine move by ±5–10 % from round to round; this moves by ~1 %, so it can tell a 3 % budget apart.
// Timers are stretched under valgrind (a request takes ~50× longer), so periodic work (prom-client's
// event-loop sampling) counts for more here than it costs in production: the figure is an upper bound.
// `--by-function`: both run with node's `--perf-basic-prof` (so JIT code has names), and each round also prints
// the functions whose own instructions per request differ most (a function inlined in one build and not in the
// other shows as a pair that cancels out).
// Usage: npm run build && node bench/instructions.mjs --base <another built checkout> [--process gateway|agents]
//   [--requests 3000] [--warmup 10000] [--rounds 3] [--env-a K=V,…] [--env-b K=V,…] [--by-function]
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort, startLocalNats, startLocalRedis, stopOnExit } from '@vab/testkit';
import { differences, selfCost } from './callgrind-functions.mjs';
import { benchFlow, envOf, flag, option, sendJson, startProcess } from './processes.mjs';
import { root as here } from './lib/figures.mjs';

const base = option('base');
const WHO = option('process', 'gateway');
const REQUESTS = option('requests', 3000);
const WARMUP = option('warmup', 10000);
const ROUNDS = option('rounds', 3);
const BY_FUNCTION = flag('by-function');
// (V8 would also write an isolate-*.log per process into the working directory: not wanted)
const nodeFlags = BY_FUNCTION ? ['--perf-basic-prof', '--no-logfile-per-isolate', '--logfile=/dev/null'] : [];
if (!base || !['gateway', 'agents'].includes(WHO)) {
  console.error(
    'usage: node bench/instructions.mjs --base <another built checkout> [--process gateway|agents] ' +
      '[--requests 3000] [--warmup 10000] [--rounds 3] [--by-function]',
  );
  process.exit(2);
}
try {
  execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
} catch {
  console.error('valgrind is needed (Debian package valgrind)');
  process.exit(2);
}

const out = mkdtempSync(join(tmpdir(), 'vab-callgrind-'));
process.on('exit', () => rmSync(out, { recursive: true, force: true }));

/** `file` under callgrind; resolves once its output says `ready`. */
function underCallgrind(file, env, ready) {
  const child = stopOnExit(
    spawn(
      'valgrind',
      ['--tool=callgrind', `--callgrind-out-file=${out}/cg.%p`, process.execPath, ...nodeFlags, file],
      {
        env: { PATH: process.env.PATH, LOG_LEVEL: 'info', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  return new Promise((res, rej) => {
    let tail = '';
    const onData = (d) => {
      tail = (tail + d).slice(-4096);
      if (tail.includes(ready)) {
        child.stdout.off('data', onData);
        child.stdout.resume();
        res(child);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.resume();
    child.on('exit', (code) => rej(new Error(`${file} exited (${code}) before it was ready`)));
  });
}

/** `n` GETs of `url`, `concurrency` at a time. */
async function load(url, n, concurrency = 10) {
  let sent = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent++ < n) {
        const res = await fetch(url);
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`GET answered ${res.status}`);
      }
    }),
  );
}

/** One build's instructions per request in the measured process. */
async function measure(root, extraEnv) {
  const nats = await startLocalNats();
  const redis = await startLocalRedis();
  const env = { NATS_URL: nats.url, REDIS_URL: redis.url, ...extraEnv };
  const port = await freePort();
  const gatewayEnv = { ...env, PORT: String(port), RATE_LIMIT_MAX: '1000000000' };
  const agentsFile = join(root, 'services/agents/dist/main.js');
  const gatewayFile = join(root, 'services/gateway/dist/main.js');
  const agents =
    WHO === 'agents'
      ? await underCallgrind(agentsFile, env, '"msg":"serving"')
      : await startProcess(agentsFile, env, '"msg":"serving"');
  const gateway =
    WHO === 'gateway'
      ? await underCallgrind(gatewayFile, gatewayEnv, 'gateway listening')
      : await startProcess(gatewayFile, gatewayEnv, 'gateway listening');
  const measured = WHO === 'gateway' ? gateway : agents;
  try {
    const url = `http://127.0.0.1:${port}`;
    const agent = await sendJson('POST', `${url}/api/agents`, { name: 'Bench', flow: benchFlow() });
    await load(`${url}/api/agents/${agent.id}`, WARMUP);
    execFileSync('callgrind_control', ['--zero', String(measured.pid)], { stdio: 'ignore' });
    await load(`${url}/api/agents/${agent.id}`, REQUESTS);
    execFileSync('callgrind_control', ['--dump', String(measured.pid)], { stdio: 'ignore' });
    // the dump is written by the process itself, after the command returns
    for (let i = 0; i < 50; i++) {
      const total = dumped(measured.pid);
      if (total !== undefined) return { perRequest: total / REQUESTS, pid: measured.pid };
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('callgrind wrote no dump');
  } finally {
    gateway.kill('SIGKILL');
    agents.kill('SIGKILL');
    await nats.stop();
    await redis.stop();
  }
}

/** The instruction total of the `--dump` file of `pid` (its `.1` part), once written. */
function dumped(pid) {
  const file = readdirSync(out).find((f) => f === `cg.${pid}.1`);
  if (!file) return undefined;
  const m = /^(?:summary|totals): (\d+)/m.exec(readFileSync(join(out, file), 'utf8'));
  return m ? Number(m[1]) : undefined;
}

console.log(
  `# Instructions per request in the ${WHO} process, scenario 1 — A ${resolve(base)}, B ${here}; ` +
    `${WARMUP} requests of warm-up, ${REQUESTS} measured, 10 at a time` +
    (option('env-a') || option('env-b')
      ? `; env A: ${option('env-a') ?? '-'}, B: ${option('env-b') ?? '-'}`
      : ''),
);
console.log('| round | A instructions/request | B instructions/request | B/A |');
console.log('|---|---|---|---|');
const as = [];
const bs = [];
for (let i = 1; i <= ROUNDS; i++) {
  // A and B at once: each is one valgrind on one of the two cores, and instructions do not depend on timing
  const [a, b] = await Promise.all([
    measure(resolve(base), envOf(option('env-a'))),
    measure(here, envOf(option('env-b'))),
  ]);
  as.push(a.perRequest);
  bs.push(b.perRequest);
  console.log(
    `| ${i} | ${Math.round(a.perRequest)} | ${Math.round(b.perRequest)} | ${(b.perRequest / a.perRequest).toFixed(3)} |`,
  );
  if (BY_FUNCTION) byFunction(a.pid, b.pid);
}

/** The functions of this round whose own instructions per request differ most between A and B. */
function byFunction(pidA, pidB) {
  // URLs first: `file:///work/x/a.js` must lose the whole prefix
  const roots = [`file://${resolve(base)}/`, `file://${here}/`, `${resolve(base)}/`, `${here}/`];
  const rows = differences(
    selfCost(join(out, `cg.${pidA}.1`), pidA, roots),
    selfCost(join(out, `cg.${pidB}.1`), pidB, roots),
    REQUESTS,
  );
  for (const pid of [pidA, pidB]) rmSync(`/tmp/perf-${pid}.map`, { force: true });
  console.log('\n| B − A | A | B | function (own instructions per request) |');
  console.log('|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${Math.round(r.b - r.a)} | ${Math.round(r.a)} | ${Math.round(r.b)} | ${r.name.slice(0, 120).replaceAll('|', '/')} |`,
    );
  }
  console.log('');
}
// the median: a round whose measured window held one of V8's rare full collections reads several % higher
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
console.log(
  `\nmedian A ${Math.round(median(as))}, B ${Math.round(median(bs))} instructions per request: ` +
    `B/A ${(median(bs) / median(as)).toFixed(3)}`,
);
process.exit(0);
