#!/usr/bin/env node
// Starts the whole local stack: NATS and Redis (the configured ones when they answer, else local servers
// started here), then every service as its own process. Prints the gateway URL once it is ready.
// NATS_URL may name several servers (a cluster: used when one of them answers); REDIS_CLUSTER_NODES names a
// Redis Cluster, which is then used as it is (no Redis is started). Ctrl-C stops everything it started.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { natsConfig, requireBinary, tcpProbe, waitFor } from '@vab/testkit';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const stateDir = join(root, '.stack');
const env = process.env;
const NATS_URL = env.NATS_URL ?? 'nats://127.0.0.1:4222';
const REDIS_URL = env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const REDIS_CLUSTER_NODES = env.REDIS_CLUSTER_NODES?.trim() ?? '';
const PORT = env.PORT ?? '3000';
const HOST = env.HOST ?? '127.0.0.1';
const children = [];
let stopping = false;

const log = (msg) => console.log(`[stack] ${msg}`);

function hostPort(url, defPort) {
  const u = new URL(url);
  return { host: u.hostname || '127.0.0.1', port: Number(u.port || defPort) };
}

const answers = ({ host, port }, send, expect) => tcpProbe(port, send, expect, host);

/** Stops with the install command when a server binary is missing (testkit says which package). */
function needBinary(bin, pkg) {
  try {
    requireBinary(bin, pkg);
  } catch (err) {
    console.error(`[stack] nothing answers at its URL, and ${err.message}`);
    process.exit(1);
  }
}

function run(name, cmd, args, extraEnv = {}) {
  // The servers get a process group of their own: Ctrl-C signals the whole terminal group at once, and a
  // nats-server or redis-server stopping at the same moment as the services would cut them off mid-drain.
  // shutdown() stops them after the services are done.
  const server = name.endsWith('-server');
  const child = spawn(cmd, args, {
    env: { ...env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: server,
  });
  const prefix = `[${name}] `;
  const pipe = (stream, out) =>
    stream.on('data', (d) =>
      String(d)
        .split('\n')
        .filter(Boolean)
        .forEach((l) => out.write(prefix + l + '\n')),
    );
  pipe(child.stdout, process.stdout);
  pipe(child.stderr, process.stderr);
  child.on('exit', (code, signal) => {
    if (!stopping) {
      log(`${name} exited (${code ?? signal}); stopping the stack`);
      void shutdown(1);
    }
  });
  children.push({ name, child });
  return child;
}

async function ensureNats() {
  const urls = NATS_URL.split(',').map((u) => u.trim());
  for (const url of urls) {
    if (await answers(hostPort(url, 4222), undefined, 'INFO')) {
      log(`using NATS at ${NATS_URL}`);
      return;
    }
  }
  if (urls.length > 1) {
    console.error(`[stack] no NATS server of NATS_URL=${NATS_URL} answers; start the cluster first`);
    process.exit(1);
  }
  const target = hostPort(NATS_URL, 4222);
  needBinary('nats-server', 'nats-server');
  mkdirSync(stateDir, { recursive: true });
  const conf = join(stateDir, 'nats.conf');
  // 8 MiB: flows and transcripts above NATS' 1 MB default cross the bus (docs/api.md, Limits).
  writeFileSync(conf, natsConfig(target.host, target.port, join(stateDir, 'jetstream')));
  run('nats-server', 'nats-server', ['-c', conf]);
  await waitFor('nats-server', () => answers(target, undefined, 'INFO'), 15000);
  log(`started nats-server on ${target.host}:${target.port}`);
}

async function ensureRedis() {
  if (REDIS_CLUSTER_NODES) {
    const seeds = REDIS_CLUSTER_NODES.split(',').map((hp) => hostPort(`redis://${hp.trim()}`, 6379));
    // a cluster with a password answers NOAUTH: it is there all the same
    const up = await Promise.all(
      seeds.map(
        async (seed) => (await answers(seed, 'PING\r\n', 'PONG')) || answers(seed, 'PING\r\n', 'NOAUTH'),
      ),
    );
    if (!up.some(Boolean)) {
      console.error(
        `[stack] no node of REDIS_CLUSTER_NODES=${REDIS_CLUSTER_NODES} answers; start the cluster first`,
      );
      process.exit(1);
    }
    log(`using the Redis Cluster at ${REDIS_CLUSTER_NODES}`);
    return;
  }
  const target = hostPort(REDIS_URL, 6379);
  if (await answers(target, 'PING\r\n', 'PONG')) {
    log(`using Redis at ${REDIS_URL}`);
    return;
  }
  needBinary('redis-server', 'redis-server');
  const dir = join(stateDir, 'redis');
  mkdirSync(dir, { recursive: true });
  run('redis-server', 'redis-server', [
    '--port',
    String(target.port),
    '--bind',
    target.host,
    '--dir',
    dir,
    '--appendonly',
    'yes',
    '--save',
    '',
  ]);
  await waitFor('redis-server', () => answers(target, 'PING\r\n', 'PONG'), 15000);
  log(`started redis-server on ${target.host}:${target.port} (append-only file in .stack/redis)`);
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  // Services first (they drain their work), then the servers they use.
  const services = children.filter((c) => !c.name.endsWith('-server'));
  const servers = children.filter((c) => c.name.endsWith('-server'));
  for (const group of [services, servers]) {
    await Promise.all(
      group.map(
        ({ child }) =>
          new Promise((resolve) => {
            if (child.exitCode !== null) return resolve();
            child.once('exit', resolve);
            child.kill('SIGTERM');
          }),
      ),
    );
  }
  process.exit(code);
}

process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));
// A crash of this script must not leave the detached servers behind.
process.on('exit', () => {
  for (const { child } of children) if (child.exitCode === null) child.kill('SIGTERM');
});

for (const svc of ['agents', 'sessions', 'playground', 'gateway']) {
  if (!existsSync(join(root, 'services', svc, 'dist', 'main.js'))) {
    console.error(`[stack] services/${svc} is not built: run \`npm start\` (it builds first)`);
    process.exit(1);
  }
}
await ensureNats();
await ensureRedis();
const common = { NATS_URL, REDIS_URL, REDIS_CLUSTER_NODES };
// Local development: flows may call services on this machine (a webhook receiver, a local model server, an
// MCP server under development). A deployment leaves FLOW_EGRESS_ALLOW unset, so flows reach no internal
// address (docs/operations.md).
const FLOW_EGRESS_ALLOW = env.FLOW_EGRESS_ALLOW ?? '127.0.0.1,::1,localhost';
log(`flows may reach FLOW_EGRESS_ALLOW=${FLOW_EGRESS_ALLOW} (local development)`);
run('agents', 'node', [join(root, 'services/agents/dist/main.js')], common);
run('sessions', 'node', [join(root, 'services/sessions/dist/main.js')], common);
run('playground', 'node', [join(root, 'services/playground/dist/main.js')], { ...common, FLOW_EGRESS_ALLOW });
run('gateway', 'node', [join(root, 'services/gateway/dist/main.js')], { ...common, PORT, HOST });
const base = `http://${HOST === '0.0.0.0' ? '127.0.0.1' : HOST}:${PORT}`;
await waitFor(
  'gateway',
  async () => {
    try {
      return (await fetch(`${base}/readyz`)).ok;
    } catch {
      return false;
    }
  },
  30000,
);
log(`ready: gateway at ${base}  (API docs: ${base}/docs)  — Ctrl-C stops everything`);
