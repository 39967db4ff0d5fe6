import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dockerAnswers, startNatsContainer, startRedisContainer } from './containers.js';
import { freePort, tcpProbe, waitFor } from './ports.js';
import { ownTempDir, removeOwnTempDirs, removeTempDir } from './temp-dirs.js';

/** 8 MiB: flows and transcripts above NATS' 1 MB default must cross the bus (see docs/api.md, Limits). */
export const TEST_NATS_MAX_PAYLOAD = 8 * 1024 * 1024;

export interface TestServer {
  url: string;
  port: number;
  /** Stops the server (SIGKILL when `crash`). */
  stop(opts?: { crash?: boolean }): Promise<void>;
  /** Starts it again on the same port, with the same data directory. */
  start(): Promise<void>;
}

export function hasBinary(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`]).status === 0;
}

export function requireBinary(name: string, debianPackage: string): void {
  if (!hasBinary(name)) {
    throw new Error(
      `${name} is not installed: install the Debian package with \`apt-get install -y ${debianPackage}\``,
    );
  }
}

const running = new Set<ChildProcess>();

/**
 * Sends SIGTERM to `child` when this process exits, unless it is gone by then: a test or benchmark that
 * throws half-way through its set-up never reaches its dispose(), and its servers would outlive it. A
 * process stopped by SIGINT or SIGTERM (Ctrl-C on a benchmark) never emits `exit` by default, so those
 * signals stop the children first and then end the process as the signal would have. Either way the servers
 * are waited for (at most STOP_WAIT_MS) before their directories go (temp-dirs.ts), so that none writes its
 * last files into a directory already removed.
 */
export function stopOnExit(child: ChildProcess): ChildProcess {
  if (running.size === 0) {
    // before temp-dirs' own exit handler, which removes the directories once they are stopped
    process.prependOnceListener('exit', stopAndWait);
    for (const signal of SIGNALS) process.once(signal, onSignal);
  }
  running.add(child);
  child.once('exit', () => {
    running.delete(child);
    if (running.size === 0) {
      process.removeListener('exit', stopAndWait);
      for (const signal of SIGNALS) process.removeListener(signal, onSignal);
    }
  });
  return child;
}

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;
const STOP_WAIT_MS = 3_000;

/** SIGTERM to every server; their pids. */
function stopAll(): number[] {
  const pids = [...running].flatMap((child) => (child.pid === undefined ? [] : [child.pid]));
  for (const child of running) child.kill('SIGTERM');
  return pids;
}

/**
 * Stops every server and waits for them, synchronously (an `exit` handler allows no other wait, and a
 * signal's ends the process right after): until each is a zombie (it exited; this process, blocked here,
 * cannot reap it) or gone, polled in /proc, at most STOP_WAIT_MS.
 */
function stopAndWait(): void {
  const pids = stopAll();
  const until = Date.now() + STOP_WAIT_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (pids.some(stillRunning) && Date.now() < until) Atomics.wait(pause, 0, 0, 20);
}

function stillRunning(pid: number): boolean {
  try {
    // the state is the field after the command's parenthesis
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function onSignal(signal: NodeJS.Signals): void {
  try {
    stopAndWait();
    // the process ends by the signal (no `exit` event): the directories go here, once the servers stopped
    removeOwnTempDirs();
  } finally {
    process.kill(process.pid, signal);
  }
}

/**
 * The command as one that gets SIGTERM when this process dies, however it dies (`kill -9`, the OOM killer):
 * `stopOnExit` covers every other end, and the servers have no channel of their own to watch. util-linux's
 * `setpriv --pdeathsig` (Linux, every Debian) sets it and then execs the server, so the child's pid is the
 * server's; without it, the command as it is. The signal follows the thread that spawned the child, which is
 * the process's main thread here (tests and benchmarks start their servers from it).
 */
function diesWithParent(command: string, args: string[]): [string, string[]] {
  return hasSetpriv() ? ['setpriv', ['--pdeathsig', 'SIGTERM', '--', command, ...args]] : [command, args];
}
let setprivFound: boolean | undefined;
const hasSetpriv = () => (setprivFound ??= process.platform === 'linux' && hasBinary('setpriv'));

/** A server this process runs as a child (nats-server, redis-server), stopped when this process exits. */
export class LocalProcessServer implements TestServer {
  private child: ChildProcess | undefined;
  constructor(
    readonly port: number,
    readonly url: string,
    private readonly command: string,
    private readonly args: string[],
    private readonly probe: () => Promise<boolean>,
    private readonly cleanup: () => void,
    private readonly env: Record<string, string> = {},
  ) {}

  async start(): Promise<void> {
    const [command, args] = diesWithParent(this.command, this.args);
    const child = stopOnExit(
      spawn(command, args, {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, ...this.env },
      }),
    );
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2000);
    });
    this.child = child;
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code) => reject(new Error(`${this.command} exited (${code}): ${stderr}`))),
    );
    exited.catch(() => undefined);
    await Promise.race([waitFor(`${this.command} on ${this.port}`, this.probe), exited]);
  }

  async stop(opts: { crash?: boolean } = {}): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(opts.crash ? 'SIGKILL' : 'SIGTERM');
    await gone;
  }

  async dispose(): Promise<void> {
    await this.stop();
    this.cleanup();
  }
}

/**
 * A nats-server configuration: where it listens, the payload limit every stack of ours uses, and JetStream
 * (session events are kept in a stream, recordings in an Object Store bucket) storing its files under
 * `storeDir`, with room for both streams' limits (1 GiB + 2 GiB by default), as deploy/nats.conf.
 */
export const natsConfig = (
  host: string,
  port: number,
  storeDir: string,
  maxPayload = TEST_NATS_MAX_PAYLOAD,
) =>
  `host: ${host}\nport: ${port}\nmax_payload: ${maxPayload}\n` +
  `jetstream {\n  store_dir: ${JSON.stringify(storeDir)}\n  max_memory_store: 256MB\n  max_file_store: 4GB\n}\n`;

/**
 * `configFile`: run the server with that file (e.g. the deployment's, with its users and permissions), its
 * `$VARIABLES` taken from `env`; host and ports are still this test's own (command-line flags win).
 */
export async function startLocalNats(
  opts: { maxPayload?: number; configFile?: string; env?: Record<string, string> } = {},
): Promise<TestServer & { dispose(): Promise<void> }> {
  requireBinary('nats-server', 'nats-server');
  const port = await freePort();
  const dir = ownTempDir('nats');
  const conf = join(dir, 'nats.conf');
  writeFileSync(conf, natsConfig('127.0.0.1', port, join(dir, 'js'), opts.maxPayload));
  const args = opts.configFile
    ? ['-c', opts.configFile, '-a', '127.0.0.1', '-p', String(port), '-m', String(await freePort())]
    : ['-c', conf];
  const server = new LocalProcessServer(
    port,
    `nats://127.0.0.1:${port}`,
    'nats-server',
    args,
    () => tcpProbe(port, undefined, 'INFO'),
    () => removeTempDir(dir),
    // the deployment's file stores JetStream where this says
    { NATS_JETSTREAM_DIR: join(dir, 'js'), ...opts.env },
  );
  await server.start();
  return server;
}

/** A local redis-server on `port`, keeping its files in `dir`, as every test Redis runs (one or in a cluster). */
export function localRedisServer(port: number, dir: string, extraArgs: string[], cleanup: () => void) {
  return new LocalProcessServer(
    port,
    `redis://127.0.0.1:${port}`,
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...extraArgs],
    () => tcpProbe(port, 'PING\r\n', '+PONG'),
    cleanup,
  );
}

export async function startLocalRedis(
  opts: { appendOnly?: boolean } = {},
): Promise<TestServer & { dispose(): Promise<void> }> {
  requireBinary('redis-server', 'redis-server');
  const port = await freePort();
  const dir = ownTempDir('redis');
  const server = localRedisServer(
    port,
    dir,
    opts.appendOnly ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'],
    () => removeTempDir(dir),
  );
  await server.start();
  return server;
}

export interface DisposableServer {
  url: string;
  dispose(): Promise<void>;
}

/**
 * A NATS server of the caller's own: containers where a Docker engine answers, else the local binary on a
 * free port. Test stacks each get one, because every instance of a service joins the same queue group and
 * two stacks on one server would answer each other's requests.
 */
export async function startNats(opts: { maxPayload?: number } = {}): Promise<DisposableServer> {
  if (await dockerAnswers()) return startNatsContainer(opts.maxPayload ?? TEST_NATS_MAX_PAYLOAD);
  return startLocalNats(opts);
}

export async function startRedis(): Promise<DisposableServer> {
  if (await dockerAnswers()) return startRedisContainer();
  return startLocalRedis();
}
