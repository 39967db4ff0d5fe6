#!/usr/bin/env node
// Where the CPU goes: runs GET /api/agents/:id (20-node flow) under autocannon (50 connections) against the
// gateway path or the monolith baseline and prints each process's CPU time per request (from /proc), so a
// change can be traced to the process it helped. With --cpu-prof, the gateway and agents processes also
// write V8 CPU profiles (open them in Chrome DevTools or speedscope) under the directory printed.
// --target monolith-edge: the monolith behind the gateway's HTTP edge (bench/monolith.mjs, EDGE=1).
// --append: scenario 4 instead (POST .../messages through the gateway to the sessions service).
// Usage: npm run build && node bench/cpu-split.mjs [--target gateway|monolith|monolith-edge] [--append]
//          [--seconds 6] [--cpu-prof]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startLocalNats, startLocalRedis } from '@vab/testkit';
import { benchFlow, flag, option, perRequest, sendJson, startProcess, usage } from './processes.mjs';
import { root } from './lib/figures.mjs';

const TARGET = option('target', 'gateway');
const APPEND = flag('append');
const SECONDS = option('seconds', 6);
const profileDir = flag('cpu-prof') ? mkdtempSync(join(tmpdir(), 'vab-cpu-prof-')) : undefined;
if (!['gateway', 'monolith', 'monolith-edge'].includes(TARGET))
  throw new Error('--target is gateway, monolith or monolith-edge');
if (APPEND && TARGET !== 'gateway') throw new Error('--append runs through the gateway only');

const children = {};
async function start(name, file, env, ready) {
  const prof = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, name)}`] : [];
  children[name] = await startProcess(file, env, ready, prof);
}

/** CPU seconds of this process's children that have exited and been reaped (the load generator runs). */
const reapedChildrenCpuSeconds = () => {
  const f = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(f[13]) + Number(f[14])) / 100;
};

function autocannon(url, seconds, json, body) {
  const args = [join(root, 'node_modules/autocannon/autocannon.js'), '-c', '50', '-d', String(seconds)];
  if (json) args.push('-j');
  if (body) args.push('-m', 'POST', '-H', 'content-type=application/json', '-b', body);
  const child = spawn(process.execPath, [...args, url], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  return new Promise((resolve) => child.on('exit', () => resolve({ pid: child.pid, out })));
}

const nats = await startLocalNats();
const redisServer = await startLocalRedis();
const env = { NATS_URL: nats.url, REDIS_URL: redisServer.url };
const gwPort = await freePort();
const monoPort = await freePort();
await start('agents', join(root, 'services/agents/dist/main.js'), env, '"msg":"serving"');
await start(
  'sessions',
  join(root, 'services/sessions/dist/main.js'),
  // scenario 4 appends far more than one session may hold in production
  { ...env, MAX_MESSAGES_PER_SESSION: '10000000' },
  '"msg":"serving"',
);
await start(
  'gateway',
  join(root, 'services/gateway/dist/main.js'),
  { ...env, PORT: String(gwPort), RATE_LIMIT_MAX: '1000000000' },
  'gateway listening',
);
await start(
  'monolith',
  join(root, 'bench/monolith.mjs'),
  {
    ...env,
    PORT: String(monoPort),
    ...(TARGET === 'monolith-edge' ? { EDGE: '1', RATE_LIMIT_MAX: '1000000000' } : {}),
  },
  'monolith listening',
);

const flow = benchFlow();
const agent = await sendJson('POST', `http://127.0.0.1:${gwPort}/api/agents`, { name: 'Bench', flow });
const port = TARGET === 'gateway' ? gwPort : monoPort;
let url = `http://127.0.0.1:${port}/api/agents/${agent.id}`;
let body;
if (APPEND) {
  const session = await sendJson('POST', `${url}/test-sessions`, { sessionType: 'text' });
  url = `${url}/test-sessions/${session.id}/messages`;
  body = JSON.stringify({
    role: 'user',
    content: 'I would like to book an appointment for Tuesday morning, please.',
    stepId: 'talk',
    timestamp: Date.now(),
  });
}

const pids = {
  gateway: children.gateway.pid,
  agents: children.agents.pid,
  sessions: children.sessions.pid,
  monolith: children.monolith.pid,
  'nats-server': nats.child.pid,
  'redis-server': redisServer.child.pid,
};
await autocannon(url, 2, false, body); // warm-up
const before = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, usage(p)]));
const loadBefore = reapedChildrenCpuSeconds();
const run = await autocannon(url, SECONDS, true, body);
const after = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, usage(p)]));
const loadUsed = reapedChildrenCpuSeconds() - loadBefore;
const r = JSON.parse(run.out);
const total = r.requests.total;

console.log(
  `# CPU per request, ${APPEND ? 'POST .../messages' : 'GET /api/agents/:id'} via ${TARGET} — autocannon 50 connections, ${SECONDS} s, node ${process.version}`,
);
console.log(
  `${Math.round(r.requests.average)} req/s, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, non-2xx ${r.non2xx}\n`,
);
console.log('| process | CPU s | µs per request | read syscalls per request | write syscalls per request |');
console.log('|---|---|---|---|---|');
let sum = 0;
for (const [name, b] of Object.entries(before)) {
  const used = perRequest(b, after[name], total);
  if (used.cpuSeconds < 0.05) continue;
  sum += used.cpuSeconds;
  console.log(
    `| ${name} | ${used.cpuSeconds.toFixed(2)} | ${used.us.toFixed(1)} | ${used.reads.toFixed(3)} | ${used.writes.toFixed(3)} |`,
  );
}
console.log(`| all but the load generator | ${sum.toFixed(2)} | ${((sum / total) * 1e6).toFixed(1)} | | |`);
console.log(
  `| load generator (autocannon) | ${loadUsed.toFixed(2)} | ${((loadUsed / total) * 1e6).toFixed(1)} | | |`,
);
console.log(`\nbusy: ${(((sum + loadUsed) / SECONDS) * 100).toFixed(0)} % of one CPU over the run`);

for (const c of Object.values(children)) c.kill('SIGTERM');
await new Promise((res) => setTimeout(res, 1500)); // let --cpu-prof write its files on exit
if (profileDir) console.log(`\nCPU profiles: ${profileDir}/{gateway,agents,sessions,monolith}/*.cpuprofile`);
await nats.dispose();
await redisServer.dispose();
process.exit(0);
