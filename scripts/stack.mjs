#!/usr/bin/env node
// Starts the whole local stack: NATS and Redis (the configured ones when they answer, else local servers
// started here), then every service as its own process. Prints the gateway URL once it is ready.
// NATS_URL may name several servers (a cluster: used when one of them answers); REDIS_CLUSTER_NODES names a
// Redis Cluster, which is then used as it is (no Redis is started). Ctrl-C stops everything it started.
// Every line it prints is one JSON object (the services' pino lines as they are; nats-server's and
// redis-server's lines and its own wrapped the same way, `service` naming who said it), or, with
// STACK_LOG_FORMAT=pretty, one readable line per record.
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
const PRETTY = (env.STACK_LOG_FORMAT ?? 'json') === 'pretty';
if (!['json', 'pretty'].includes(env.STACK_LOG_FORMAT ?? 'json')) {
  process.stderr.write(`stack: STACK_LOG_FORMAT must be json or pretty\n`);
  process.exit(1);
}
// each service's /metrics, /healthz and /readyz (the gateway serves its own on PORT)
const METRICS_PORT_BASE = Number(env.METRICS_PORT_BASE ?? 9464);
if (!Number.isInteger(METRICS_PORT_BASE) || METRICS_PORT_BASE < 1 || METRICS_PORT_BASE > 65533) {
  process.stderr.write(`stack: METRICS_PORT_BASE must be a port number (1–65533)\n`);
  process.exit(1);
}
const METRICS_PORTS = {
  agents: METRICS_PORT_BASE,
  sessions: METRICS_PORT_BASE + 1,
  playground: METRICS_PORT_BASE + 2,
};
const children = [];
let stopping = false;

const LEVEL_NAMES = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** One record out: as a JSON line, or (pretty) `[service] LEVEL msg key=value …`. */
function print(record, out = process.stdout) {
  if (!PRETTY) {
    out.write(JSON.stringify(record) + '\n');
    return;
  }
  const { level, service, msg } = record;
  const shown = new Set(['level', 'time', 'service', 'name', 'msg', 'pid', 'hostname']);
  const rest = Object.entries(record)
    .filter(([k]) => !shown.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  const lvl = level === 30 ? '' : `${LEVEL_NAMES[level] ?? level} `;
  out.write(`[${service}] ${lvl}${msg ?? ''}${rest ? ` ${rest}` : ''}\n`);
}

const record = (service, level, msg, fields = {}) => ({
  level,
  time: new Date().toISOString(),
  service,
  msg,
  ...fields,
});

const log = (msg, fields) => print(record('stack', 30, msg, fields));
const fail = (msg, fields) => print(record('stack', 50, msg, fields), process.stderr);

/**
 * nats-server marks its lines `[INF]`, `[WRN]`, `[ERR]`, `[FTL]` (and writes them all to stderr); redis-server
 * marks warnings ` # `. Any other line on stderr is an error (a service's one-line configuration error).
 */
function levelOfServerLine(line, fromStderr) {
  if (/\[(ERR|FTL)\]/.test(line)) return 50;
  if (/\[WRN\]/.test(line) || / # /.test(line)) return 40;
  if (/\[(INF|DBG|TRC)\]/.test(line)) return 30;
  return fromStderr ? 50 : 30;
}

/** A child's line as a record: its own JSON as it is, anything else wrapped under its name. */
function recordOf(name, line, fromStderr) {
  if (line.startsWith('{')) {
    try {
      const parsed = JSON.parse(line);
      if (parsed && typeof parsed === 'object') return { service: name, ...parsed };
    } catch {
      // not JSON after all: wrapped below
    }
  }
  return record(name, levelOfServerLine(line, fromStderr), line);
}

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
    fail(`nothing answers at its URL, and ${err.message}`);
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
  // a chunk may end mid-line: the rest waits for the next one
  const pipe = (stream, out, fromStderr) => {
    let partial = '';
    stream.on('data', (d) => {
      const lines = (partial + String(d)).split('\n');
      partial = lines.pop();
      for (const l of lines) if (l.trim()) print(recordOf(name, l, fromStderr), out);
    });
    stream.on('end', () => {
      if (partial.trim()) print(recordOf(name, partial, fromStderr), out);
    });
  };
  pipe(child.stdout, process.stdout, false);
  pipe(child.stderr, process.stderr, true);
  child.on('exit', (code, signal) => {
    if (!stopping) {
      fail('a process exited; stopping the stack', { process: name, exit: code ?? signal });
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
      log('using NATS', { natsUrl: NATS_URL });
      return;
    }
  }
  if (urls.length > 1) {
    fail('no NATS server of NATS_URL answers; start the cluster first', { natsUrl: NATS_URL });
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
  log('started nats-server', { host: target.host, port: target.port });
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
      fail('no node of REDIS_CLUSTER_NODES answers; start the cluster first', {
        redisClusterNodes: REDIS_CLUSTER_NODES,
      });
      process.exit(1);
    }
    log('using the Redis Cluster', { redisClusterNodes: REDIS_CLUSTER_NODES });
    return;
  }
  const target = hostPort(REDIS_URL, 6379);
  if (await answers(target, 'PING\r\n', 'PONG')) {
    log('using Redis', { redis: `${target.host}:${target.port}` });
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
  log('started redis-server', { host: target.host, port: target.port, appendOnlyDir: '.stack/redis' });
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
    fail('a service is not built: run `npm start` (it builds first)', { service: svc });
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
log('flows may reach these internal addresses (local development)', { FLOW_EGRESS_ALLOW });
const metricsOf = (svc) => ({ METRICS_PORT: String(METRICS_PORTS[svc]), METRICS_HOST: HOST });
run('agents', 'node', [join(root, 'services/agents/dist/main.js')], { ...common, ...metricsOf('agents') });
run('sessions', 'node', [join(root, 'services/sessions/dist/main.js')], {
  ...common,
  ...metricsOf('sessions'),
});
run('playground', 'node', [join(root, 'services/playground/dist/main.js')], {
  ...common,
  ...metricsOf('playground'),
  FLOW_EGRESS_ALLOW,
});
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
const local = HOST === '0.0.0.0' ? '127.0.0.1' : HOST;
// the line a human looks for: the gateway's URL first
log('ready: the gateway answers (Ctrl-C stops everything)', {
  gateway: base,
  docs: `${base}/docs`,
  metrics: {
    gateway: `${base}/metrics`,
    ...Object.fromEntries(
      Object.entries(METRICS_PORTS).map(([svc, port]) => [svc, `http://${local}:${port}/metrics`]),
    ),
  },
});
