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
import { connect } from 'node:net';
import { freePort, natsConfig, requireBinary, tcpProbe, waitFor } from '@vab/testkit';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;
// where its own NATS (JetStream) and Redis (append-only file) keep their data
const stateDir = env.STACK_STATE_DIR || join(root, '.stack');
// Unset, the stack runs servers of its own (on the default port when it is free, else on a free one): a
// NATS or Redis that happens to answer on the default port is somebody else's, with its own data and
// limits. Set, the named server is used (and started there when nothing answers).
const NATS_GIVEN = Boolean(env.NATS_URL);
const REDIS_GIVEN = Boolean(env.REDIS_URL);
let NATS_URL = env.NATS_URL || 'nats://127.0.0.1:4222';
let REDIS_URL = env.REDIS_URL || 'redis://127.0.0.1:6379';
/** What the gateway gets on top of the environment (a body limit that fits the NATS server's payload). */
const gatewayEnv = {};
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

/** A service that exits on its own is started again, at most this often in RESTART_WINDOW_MS; then the stack stops. */
const MAX_RESTARTS = Number(env.STACK_MAX_RESTARTS ?? 3);
const RESTART_WINDOW_MS = 60_000;
/** How long a stop waits for a process after SIGTERM before SIGKILL (the services bound theirs at 10 s). */
const STOP_GRACE_MS = 15_000;
if (!Number.isInteger(MAX_RESTARTS) || MAX_RESTARTS < 0) {
  process.stderr.write(`stack: STACK_MAX_RESTARTS must be a whole number (0: never restart)\n`);
  process.exit(1);
}

const exited = (child) => child.exitCode !== null || child.signalCode !== null;

function run(name, cmd, args, extraEnv = {}) {
  // Every process gets a process group of its own: Ctrl-C signals the whole terminal group at once, and
  // what stops at the same moment as what it uses cuts the other off mid-drain (a playground ending its
  // sessions still writes their records and recordings to the sessions service, the services drain into
  // nats-server and redis-server). shutdown() stops them in that order.
  const server = name.endsWith('-server');
  const child = spawn(cmd, args, {
    env: { ...env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
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
  const entry = children.find((c) => c.name === name) ?? { name, restarts: [] };
  entry.child = child;
  if (!children.includes(entry)) children.push(entry);
  child.on('exit', (code, signal) => {
    if (stopping) return;
    const exit = code ?? signal;
    const now = Date.now();
    entry.restarts = entry.restarts.filter((t) => now - t < RESTART_WINDOW_MS);
    // a server's data and the services' connections depend on it: no restart behind their backs
    if (server || entry.restarts.length >= MAX_RESTARTS) {
      fail('a process exited; stopping the stack', { process: name, exit, restarts: entry.restarts.length });
      void shutdown(1);
      return;
    }
    entry.restarts.push(now);
    fail('a service exited; starting it again', {
      process: name,
      exit,
      restart: entry.restarts.length,
      of: MAX_RESTARTS,
    });
    run(name, cmd, args, extraEnv);
  });
  return child;
}

/** SIGTERM, then SIGKILL after STOP_GRACE_MS: resolves once the process has exited (at once if it had). */
function stop(child) {
  return new Promise((resolve) => {
    if (exited(child)) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** The INFO a NATS server sends first (its max_payload), or undefined. */
function natsInfo({ host, port }) {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    let buf = '';
    const done = (info) => {
      sock.destroy();
      resolve(info);
    };
    sock.setTimeout(1000, () => done(undefined));
    sock.on('error', () => done(undefined));
    sock.on('data', (d) => {
      buf += String(d);
      const line = buf.split('\r\n')[0];
      if (buf.includes('\r\n')) {
        try {
          done(JSON.parse(line.replace(/^INFO\s+/, '')));
        } catch {
          done(undefined);
        }
      }
    });
  });
}

/** The gateway's default body limit (1 MiB) and the margin it keeps under the bus payload (64 KiB). */
const DEFAULT_BODY_LIMIT = 1024 * 1024;
const PAYLOAD_MARGIN = 64 * 1024;

async function ensureNats() {
  const urls = NATS_URL.split(',').map((u) => u.trim());
  if (NATS_GIVEN) {
    for (const url of urls) {
      const target = hostPort(url, 4222);
      if (await answers(target, undefined, 'INFO')) {
        const info = await natsInfo(target);
        log('using the NATS server of NATS_URL (not started here, not stopped with the stack)', {
          natsUrl: NATS_URL,
          maxPayload: info?.max_payload,
        });
        fitBodyLimit(info?.max_payload);
        return;
      }
    }
    if (urls.length > 1) {
      fail('no NATS server of NATS_URL answers; start the cluster first', { natsUrl: NATS_URL });
      process.exit(1);
    }
  }
  let target = hostPort(NATS_URL, 4222);
  if (!NATS_GIVEN && (await answers(target, undefined, 'INFO'))) {
    const port = await freePort();
    print(
      record(
        'stack',
        40,
        'a NATS server this stack did not start answers on the default port: starting ours on a free port (set NATS_URL to use that one)',
        {
          taken: `${target.host}:${target.port}`,
          port,
        },
      ),
    );
    target = { host: target.host, port };
    NATS_URL = `nats://${target.host}:${port}`;
  }
  needBinary('nats-server', 'nats-server');
  mkdirSync(stateDir, { recursive: true });
  const conf = join(stateDir, 'nats.conf');
  // 8 MiB: flows and transcripts above NATS' 1 MB default cross the bus (docs/api.md, Limits).
  writeFileSync(conf, natsConfig(target.host, target.port, join(stateDir, 'jetstream')));
  run('nats-server', 'nats-server', ['-c', conf]);
  await waitFor('nats-server', () => answers(target, undefined, 'INFO'), 15000);
  log('started nats-server (ours: stopped with the stack)', { natsUrl: NATS_URL, maxPayload: '8 MiB' });
}

/**
 * A NATS server of NATS_URL with a smaller max_payload than the gateway's body limit would make large bodies
 * answer 413 at the bus: the gateway's limit is lowered to fit, unless BODY_LIMIT_BYTES is set.
 */
function fitBodyLimit(maxPayload) {
  if (env.BODY_LIMIT_BYTES || typeof maxPayload !== 'number') return;
  if (DEFAULT_BODY_LIMIT <= maxPayload - PAYLOAD_MARGIN) return;
  const fitted = Math.max(1024, maxPayload - PAYLOAD_MARGIN);
  gatewayEnv.BODY_LIMIT_BYTES = String(fitted);
  log("the NATS server's max_payload is below 1 MiB + 64 KiB: the gateway's body limit is lowered to fit", {
    maxPayload,
    bodyLimitBytes: fitted,
  });
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
  let target = hostPort(REDIS_URL, 6379);
  if (await answers(target, 'PING\r\n', 'PONG')) {
    if (REDIS_GIVEN) {
      log('using the Redis of REDIS_URL (not started here, not stopped with the stack)', {
        redis: `${target.host}:${target.port}`,
      });
      return;
    }
    const port = await freePort();
    print(
      record(
        'stack',
        40,
        'a Redis this stack did not start answers on the default port: starting ours on a free port (set REDIS_URL to use that one)',
        {
          taken: `${target.host}:${target.port}`,
          port,
        },
      ),
    );
    target = { host: target.host, port };
    REDIS_URL = `redis://${target.host}:${port}`;
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
  log('started redis-server (ours: stopped with the stack)', {
    redisUrl: REDIS_URL,
    appendOnlyDir: dir,
  });
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  // The edge and the sessions' owner first (they end what runs, writing to the others), then the storing
  // services, then the servers they all use.
  const first = new Set(['gateway', 'playground']);
  const edge = children.filter((c) => first.has(c.name));
  const servers = children.filter((c) => c.name.endsWith('-server'));
  const storing = children.filter((c) => !first.has(c.name) && !c.name.endsWith('-server'));
  for (const group of [edge, storing, servers]) await Promise.all(group.map(({ child }) => stop(child)));
  process.exit(code);
}

// A second Ctrl-C (or SIGTERM) while stopping: no more waiting, everything is killed at once.
const onSignal = () => {
  if (!stopping) return void shutdown(0);
  for (const { child } of children) if (!exited(child)) child.kill('SIGKILL');
  process.exit(1);
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
// A crash of this script must not leave the detached servers behind.
process.on('exit', () => {
  for (const { child } of children) if (!exited(child)) child.kill('SIGTERM');
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
// Node 22.7+ keeps AsyncLocalStorage's context without a hook on every promise (the default from Node 24): the
// voice pipeline makes promises per audio frame, and a third of what it allocated was that hook's
// (docs/decisions/0027). The Node that runs this script runs the services; an older one has no such flag.
const ASYNC_CONTEXT_FRAME = '--experimental-async-context-frame';
const nodeFlags = process.allowedNodeEnvironmentFlags.has(ASYNC_CONTEXT_FRAME) ? [ASYNC_CONTEXT_FRAME] : [];
const service = (name) => [...nodeFlags, join(root, `services/${name}/dist/main.js`)];
run('agents', 'node', service('agents'), { ...common, ...metricsOf('agents') });
run('sessions', 'node', service('sessions'), {
  ...common,
  ...metricsOf('sessions'),
});
run('playground', 'node', service('playground'), {
  ...common,
  ...metricsOf('playground'),
  FLOW_EGRESS_ALLOW,
});
run('gateway', 'node', service('gateway'), {
  ...common,
  ...gatewayEnv,
  PORT,
  HOST,
});
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
  console: `${base}/console`,
  docs: `${base}/docs`,
  metrics: {
    gateway: `${base}/metrics`,
    ...Object.fromEntries(
      Object.entries(METRICS_PORTS).map(([svc, port]) => [svc, `http://${local}:${port}/metrics`]),
    ),
  },
});
