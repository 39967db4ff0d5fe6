#!/usr/bin/env node
// Starts the whole local stack: NATS and Redis (the configured ones when they answer, else local servers
// started here), then every service as its own process. Prints the gateway URL once it is ready.
// NATS_URL may name several servers (a cluster: used when one of them answers); REDIS_CLUSTER_NODES names a
// Redis Cluster, which is then used as it is (no Redis is started). Ctrl-C stops everything it started.
// Every line it prints is one JSON object (the services' pino lines as they are; nats-server's and
// redis-server's lines and its own wrapped the same way, `service` naming who said it), or, with
// STACK_LOG_FORMAT=pretty, one readable line per record.
// PORT and the metrics ports are checked before anything starts; the stack is ready when its own processes
// say so (over the IPC channel each service has to it) and its own gateway answers /readyz with the stack's
// id. The services stop when that channel closes, and a guard process stops the servers, so a stack whose
// supervisor is killed leaves nothing behind (scripts/stack-guard.mjs).
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, createServer } from 'node:net';
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
if (!Number.isInteger(METRICS_PORT_BASE) || METRICS_PORT_BASE < 1 || METRICS_PORT_BASE > 65531) {
  process.stderr.write(`stack: METRICS_PORT_BASE must be a port number (1–65531)\n`);
  process.exit(1);
}
const METRICS_PORTS = {
  agents: METRICS_PORT_BASE,
  sessions: METRICS_PORT_BASE + 1,
  playground: METRICS_PORT_BASE + 2,
  telephony: METRICS_PORT_BASE + 3,
  webhooks: METRICS_PORT_BASE + 4,
};
/** Twilio's webhooks and Media Streams (docs/operations.md › Telephony): 8090, or a free port when that is taken. */
let TELEPHONY_PORT = env.TELEPHONY_PORT ?? '8090';
/** This run's id, known only to it and its processes: the gateway's /readyz echoes it (`x-stack-id`). */
const STACK_ID = randomUUID();
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

/**
 * Stops the servers when this process dies without stopping them (the services watch their own channel).
 * Started before anything else, in a group of its own; told of every process as it starts and exits.
 */
const guard = spawn(process.execPath, [join(root, 'scripts', 'stack-guard.mjs')], {
  stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  detached: true,
});
guard.on('error', (err) => fail('the guard did not start', { err: err.message }));
// this process's exit is not held by the guard's channel
guard.unref();
guard.channel?.unref();
const tellGuard = (message) => {
  if (guard.connected) guard.send(message, () => undefined);
};

function run(name, cmd, args, extraEnv = {}) {
  // Every process gets a process group of its own: Ctrl-C signals the whole terminal group at once, and
  // what stops at the same moment as what it uses cuts the other off mid-drain (a playground ending its
  // sessions still writes their records and recordings to the sessions service, the services drain into
  // nats-server and redis-server). shutdown() stops them in that order.
  const server = name.endsWith('-server');
  // A service gets an IPC channel: it says when it is up, and it stops at once when the channel closes (this
  // process stopping it, or dying). A server has none: the guard stops it.
  const child = spawn(cmd, args, {
    env: server ? { ...env, ...extraEnv } : { ...env, ...extraEnv, STACK_ID },
    stdio: server ? ['ignore', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
  });
  if (child.pid !== undefined) tellGuard({ pid: child.pid, kind: server ? 'server' : 'service' });
  // the channel does not hold this process's exit either
  child.channel?.unref();
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
  const entry = children.find((c) => c.name === name) ?? { name, restarts: [], server };
  entry.child = child;
  if (!children.includes(entry)) children.push(entry);
  child.on('message', (m) => {
    if (m?.type === 'ready') processReady(name);
  });
  child.on('exit', (code, signal) => {
    if (child.pid !== undefined) tellGuard({ gone: child.pid });
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

/**
 * A service: its channel closed (it stops at once, ending its sessions: `npm start` is for development, a
 * stop there is not a rolling update that lets calls finish); a server: SIGTERM. SIGKILL after
 * STOP_GRACE_MS. Resolves once the process has exited (at once if it had).
 */
function stop({ child, server }) {
  return new Promise((resolve) => {
    if (exited(child)) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    if (!server && child.connected) child.disconnect();
    else child.kill('SIGTERM');
  });
}

/** The services that said they are up (once each: a restarted one is not waited for again). */
const upServices = new Set();
let allUp = () => undefined;
function processReady(name) {
  upServices.add(name);
  if (SERVICES.every((s) => upServices.has(s))) allUp();
}

/**
 * Whether a program listens on host:port already (what a listen there would fail with), as the service that
 * wants it would find: a listen there, closed at once.
 */
function portTaken(host, port) {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', (err) => (err.code === 'EADDRINUSE' ? resolve(true) : reject(err)));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve(false)));
  });
}

/** `count` distinct free ports of `host`, all held until every one is found. */
async function freePortsOn(host, count) {
  const held = [];
  for (let i = 0; i < count; i++) {
    const srv = createServer();
    await new Promise((resolve, reject) => {
      srv.once('error', reject);
      srv.listen({ host, port: 0, exclusive: true }, resolve);
    });
    held.push(srv);
  }
  const ports = held.map((s) => s.address().port);
  await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

/**
 * The gateway's PORT taken by another program (a second stack, a dev server): a clear stop, naming PORT and
 * a free port, before anything starts. Not a free port of its own: the gateway's URL is what people type and
 * configure, so it does not move by itself. The metrics ports, which nobody types, move to free ports as
 * NATS and Redis do, unless METRICS_PORT_BASE names them.
 */
async function checkPorts() {
  try {
    await checkPortsFree();
  } catch (err) {
    // not a port taken: one this user may not open, or an address not of this machine
    fail('the gateway or the metrics cannot listen on HOST at these ports', {
      HOST,
      PORT,
      METRICS_PORT_BASE,
      error: err.code ?? err.message,
    });
    process.exit(1);
  }
}

async function checkPortsFree() {
  if (!env.TELEPHONY_PORT && (await portTaken(HOST, Number(TELEPHONY_PORT)))) {
    TELEPHONY_PORT = String((await freePortsOn(HOST, 1))[0]);
  }
  if (await portTaken(HOST, Number(PORT))) {
    const [free] = await freePortsOn(HOST, 1);
    fail(
      'PORT is taken by another program (a second stack? a dev server?): stop it, or start on another port',
      {
        PORT,
        host: HOST,
        free,
        example: `PORT=${free} npm start`,
      },
    );
    process.exit(1);
  }
  const taken = [];
  for (const port of Object.values(METRICS_PORTS)) if (await portTaken(HOST, port)) taken.push(port);
  if (taken.length === 0) return;
  if (env.METRICS_PORT_BASE) {
    fail('a metrics port of METRICS_PORT_BASE is taken by another program: stop it, or choose another base', {
      METRICS_PORT_BASE,
      taken,
    });
    process.exit(1);
  }
  const free = await freePortsOn(HOST, Object.keys(METRICS_PORTS).length);
  Object.keys(METRICS_PORTS).forEach((svc, i) => (METRICS_PORTS[svc] = free[i]));
  print(
    record(
      'stack',
      40,
      'a metrics port is taken by another program: the services listen on free ports (set METRICS_PORT_BASE to choose)',
      { taken, ports: METRICS_PORTS },
    ),
  );
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
  if (!NATS_GIVEN) {
    target = await ownPort(
      target,
      'a program this stack did not start (a NATS server?) holds the default port: starting ours on a free port (set NATS_URL to use a NATS there)',
    );
    NATS_URL = `nats://${target.host}:${target.port}`;
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
 * Where a server of our own starts: `target`, the default address, unless a program this stack did not start
 * holds its port (somebody else's server: left alone), then a free port on its host, said in a warning (`msg`).
 */
async function ownPort(target, msg) {
  if (!(await portTaken(target.host, target.port))) return target;
  const port = await freePort();
  print(record('stack', 40, msg, { taken: `${target.host}:${target.port}`, port }));
  return { host: target.host, port };
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
  if (REDIS_GIVEN && (await answers(target, 'PING\r\n', 'PONG'))) {
    log('using the Redis of REDIS_URL (not started here, not stopped with the stack)', {
      redis: `${target.host}:${target.port}`,
    });
    return;
  }
  if (!REDIS_GIVEN) {
    target = await ownPort(
      target,
      'a program this stack did not start (a Redis?) holds the default port: starting ours on a free port (set REDIS_URL to use a Redis there)',
    );
    REDIS_URL = `redis://${target.host}:${target.port}`;
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

/** The stack's own key for sealing webhook secrets: made once in its state directory, kept across runs. */
function webhookSecretsKeyFile() {
  const file = join(stateDir, 'webhook-secrets.key');
  if (!existsSync(file)) {
    mkdirSync(stateDir, { recursive: true });
    writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600 });
  }
  return file;
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  // The edge and the sessions' owner first (they end what runs, writing to the others), then the storing
  // services, then the servers they all use.
  const first = new Set(['gateway', 'playground', 'telephony']);
  const edge = children.filter((c) => first.has(c.name));
  const servers = children.filter((c) => c.name.endsWith('-server'));
  const storing = children.filter((c) => !first.has(c.name) && !c.name.endsWith('-server'));
  for (const group of [edge, storing, servers]) await Promise.all(group.map(stop));
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
// the terminal closed
process.on('SIGHUP', onSignal);
// A crash of this script must not leave the detached servers behind: the services' channels close with it,
// and the guard stops the servers once they are gone; without a guard, they are told here.
process.on('exit', () => {
  if (guard.connected) return;
  for (const { child } of children) if (!exited(child)) child.kill('SIGTERM');
});

const SERVICES = ['agents', 'sessions', 'playground', 'telephony', 'webhooks', 'gateway'];
for (const svc of SERVICES) {
  if (!existsSync(join(root, 'services', svc, 'dist', 'main.js'))) {
    fail('a service is not built: run `npm start` (it builds first)', { service: svc });
    process.exit(1);
  }
}
await checkPorts();
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
// a development auth token unless one is set: Twilio's requests are signed with the account's real one
run('telephony', 'node', service('telephony'), {
  ...common,
  ...metricsOf('telephony'),
  TELEPHONY_HOST: HOST,
  TELEPHONY_PORT,
  TWILIO_AUTH_TOKEN: env.TWILIO_AUTH_TOKEN ?? 'dev-twilio-auth-token',
  ...(env.TELEPHONY_PUBLIC_URL ? { PUBLIC_URL: env.TELEPHONY_PUBLIC_URL } : {}),
  ...(env.TWILIO_ACCOUNT_SID ? { TWILIO_ACCOUNT_SID: env.TWILIO_ACCOUNT_SID } : {}),
});
run('webhooks', 'node', service('webhooks'), {
  ...common,
  ...metricsOf('webhooks'),
  // local development: receivers on this machine, and a sealing key of this stack's own, kept in its state
  WEBHOOK_EGRESS_ALLOW: env.WEBHOOK_EGRESS_ALLOW ?? FLOW_EGRESS_ALLOW,
  ...(env.WEBHOOK_SECRETS_KEY ? {} : { WEBHOOK_SECRETS_KEY_FILE: webhookSecretsKeyFile() }),
});
run('gateway', 'node', service('gateway'), {
  ...common,
  ...gatewayEnv,
  PORT,
  HOST,
});
const base = `http://${HOST === '0.0.0.0' ? '127.0.0.1' : HOST}:${PORT}`;
/** How long the services get to come up (the playground loads its voice models first). */
const START_TIMEOUT_MS = 60_000;
/**
 * Ready: every service said so over its channel (no polling meanwhile, so no access lines of it), then the
 * gateway at `base` answers /readyz with this run's id: ours, not another program's on the same port.
 */
async function waitUntilReady() {
  const deadline = Date.now() + START_TIMEOUT_MS;
  const late = (what) => {
    fail('the stack did not come up in time; stopping it', {
      waitingFor: what,
      timeoutMs: START_TIMEOUT_MS,
    });
    void shutdown(1);
    return new Promise(() => undefined);
  };
  let timer;
  const up = await Promise.race([
    new Promise((resolve) => {
      allUp = () => resolve(true);
      if (SERVICES.every((s) => upServices.has(s))) resolve(true);
    }),
    new Promise((resolve) => (timer = setTimeout(() => resolve(false), START_TIMEOUT_MS))),
  ]);
  clearTimeout(timer);
  if (!up) return late(SERVICES.filter((s) => !upServices.has(s)));
  while (Date.now() < deadline) {
    const res = await fetch(`${base}/readyz`).catch(() => undefined);
    if (res?.ok && res.headers.get('x-stack-id') === STACK_ID) return;
    if (res && res.headers.get('x-stack-id') !== STACK_ID) {
      fail("another program answers at the gateway URL, not this stack's gateway: stopping", {
        gateway: base,
        PORT,
      });
      await shutdown(1);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return late(['gateway /readyz']);
}
await waitUntilReady();
const local = HOST === '0.0.0.0' ? '127.0.0.1' : HOST;
// the line a human looks for: the gateway's URL first
log('ready: the gateway answers (Ctrl-C stops everything)', {
  gateway: base,
  console: `${base}/console`,
  telephony: `http://${local}:${TELEPHONY_PORT}/telephony/twilio/voice`,
  docs: `${base}/docs`,
  metrics: {
    gateway: `${base}/metrics`,
    ...Object.fromEntries(
      Object.entries(METRICS_PORTS).map(([svc, port]) => [svc, `http://${local}:${port}/metrics`]),
    ),
  },
});
