// Shared by the benchmarks: starting a service process, reading what a process has used, sending JSON to
// the API, and the realistic flow scenario 1 reads.
import { spawn } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  clinicScript,
  freePort,
  fullFlow,
  startLocalNats,
  startLocalRedis,
  startOpenAiStub,
  stopOnExit,
} from '@vab/testkit';

/** The value after `--name` on the command line, or `def` when it is not given; a number when `def` is one. */
export function option(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= process.argv.length) return def;
  return typeof def === 'number' ? Number(process.argv[i + 1]) : process.argv[i + 1];
}

/** Whether `--name` is on the command line. */
export function flag(name) {
  return process.argv.includes(`--${name}`);
}

/** `K=V,K2=V2` (an `--env-a`-style option) as an environment object; nothing given: none. */
export const envOf = (text) =>
  Object.fromEntries(
    (text ?? '')
      .split(',')
      .filter(Boolean)
      .map((kv) => kv.split('=')),
  );

/**
 * Starts `node [...nodeArgs] file` and resolves once its output contains `ready`. Only the tail of the
 * output is kept and only until ready: scanning an ever-growing string of every access-log line would spend
 * this machine's shared CPU on the bench itself, against the process that logs.
 */
export function startProcess(file, env, ready, nodeArgs = []) {
  // A service is started as `npm start` starts it (STACK_ID and an IPC channel): it stops when the channel
  // closes, so a benchmark killed outright (SIGKILL, an OOM) leaves none of its services running on
  // (one was found hours later, its bus long gone); a clean exit stops them with a SIGTERM as before.
  const service = /[\\/]services[\\/][^\\/]+[\\/]dist[\\/]main\.js$/.test(file);
  return new Promise((resolve, reject) => {
    const child = stopOnExit(
      spawn(process.execPath, [...nodeArgs, file], {
        env: { PATH: process.env.PATH, LOG_LEVEL: 'info', ...(service ? { STACK_ID: 'bench' } : {}), ...env },
        stdio: service ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
      }),
    );
    // the channel does not hold this process's exit
    child.channel?.unref();
    let out = '';
    let isReady = false;
    // what it printed while starting (e.g. which NATS server it connected to), for benchmarks that ask
    child.startupOutput = '';
    // its error lines (pino level 50 and up), the first 20, for benchmarks that explain a failure
    child.errorLines = [];
    const onData = (d) => {
      if (child.errorLines.length < 20) {
        for (const line of String(d).split('\n')) {
          if (/"level":(50|60)/.test(line) && child.errorLines.length < 20) child.errorLines.push(line);
        }
      }
      if (!isReady) child.startupOutput = (child.startupOutput + d).slice(0, 16384);
      const text = out + d;
      out = text.slice(-4096);
      if (!isReady && text.includes(ready)) {
        isReady = true;
        resolve(child);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    // BENCH_LOG_DIR=<dir>: every line each process printed, kept in <dir>/<service>-<pid>.log (to explain a run)
    if (process.env.BENCH_LOG_DIR) {
      const name = basename(dirname(dirname(file)));
      const log = createWriteStream(join(process.env.BENCH_LOG_DIR, `${name}-${child.pid}.log`));
      child.stdout.pipe(log);
      child.stderr.pipe(log);
    }
    child.on('exit', (code) => {
      if (!isReady) reject(new Error(`${file} exited ${code}: ${out.slice(-500)}`));
    });
  });
}

/**
 * The agents and sessions services and a gateway on a free port, started from the builds under `root` (a
 * benchmark may start another checkout's), with `env` for all three and `gatewayEnv` on top for the gateway.
 * The gateway's rate limit is lifted: a benchmark is one client sending as fast as it can.
 */
export async function startCore(root, env, gatewayEnv = {}) {
  const port = await freePort();
  const services = { ...env, LOG_LEVEL: 'info' };
  const agents = await startProcess(join(root, 'services/agents/dist/main.js'), services, '"msg":"serving"');
  const sessions = await startProcess(
    join(root, 'services/sessions/dist/main.js'),
    services,
    '"msg":"serving"',
  );
  const gateway = await startProcess(
    join(root, 'services/gateway/dist/main.js'),
    { ...services, PORT: String(port), RATE_LIMIT_MAX: '1000000000', ...gatewayEnv },
    'gateway listening',
  );
  return { url: `http://127.0.0.1:${port}`, agents, sessions, gateway, procs: [agents, sessions, gateway] };
}

/**
 * A benchmark's own NATS and Redis with `startCore` on them, per-caller session limits lifted (the benchmark
 * is every caller). `env`: the services' settings beyond the servers (quiet logs and flows that may call the
 * stubs on loopback unless it says otherwise); returned whole for the playground processes a benchmark starts.
 */
export async function startCoreStack(root, env = {}) {
  const nats = await startLocalNats();
  const redis = await startLocalRedis();
  const all = {
    NATS_URL: nats.url,
    REDIS_URL: redis.url,
    LOG_LEVEL: 'warn',
    FLOW_EGRESS_ALLOW: '127.0.0.1',
    ...env,
  };
  const core = await startCore(root, all, { SESSION_RATE_LIMIT_MAX: '1000000000' });
  return { ...core, nats, redis, env: all };
}

/** An in-process playground's admission by load, off unless asked for: a benchmark measures what its load costs. */
export const admissionOff = () => ({
  LOAD_MAX_EVENT_LOOP_P99_MS: process.env.LOAD_MAX_EVENT_LOOP_P99_MS ?? '0',
  LOAD_MAX_BEHIND_MS: process.env.LOAD_MAX_BEHIND_MS ?? '0',
  LOAD_MAX_CPU_PERCENT: process.env.LOAD_MAX_CPU_PERCENT ?? '0',
});

/**
 * An in-process playground's settings for `sessions` voice sessions that one bench process plays every caller
 * of (room for a few more), recordings `on` or `off`, flows calling the stubs on loopback; `loadConfig` is the
 * playground's own (passed in: this module does not load the playground).
 */
export const voiceConfig = (loadConfig, sessions, recordings) => ({
  ...loadConfig({
    FLOW_EGRESS_ALLOW: '127.0.0.1',
    ...admissionOff(),
    MAX_SESSIONS: String(sessions + 5),
    MAX_SESSIONS_PER_CALLER: String(sessions + 5),
    RECORDINGS: recordings,
  }),
  VOICE_INPUT_IDLE_MS: 30_000,
});

/** A realistic 20-node flow. */
export function benchFlow() {
  const flow = fullFlow();
  while (flow.nodes.length < 20)
    flow.nodes.push({
      id: `extra-${flow.nodes.length}`,
      nodeType: 'opentalk',
      command: 'Keep the conversation going and note any preferences the caller mentions.',
    });
  return flow;
}

/**
 * What a process has used so far, from /proc: user + system CPU seconds, and its read and write system
 * calls (all threads, sockets and files alike). Syscalls per request show how many requests share each read
 * and write: the batch size that decides what the bus costs (docs/performance.md).
 */
export function usage(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const count = (name) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1] ?? NaN);
  return {
    cpuSeconds: (Number(f[11]) + Number(f[12])) / 100,
    reads: count('syscr'),
    writes: count('syscw'),
  };
}

/** The pids under `pid` (its children, theirs, …), from /proc: every one of its threads' children. */
export function descendants(pid) {
  const out = [];
  let tasks = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tasks) {
    let children = '';
    try {
      children = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    for (const child of children.split(' ').filter(Boolean))
      out.push(Number(child), ...descendants(Number(child)));
  }
  return out;
}

/**
 * The CPU seconds (user + system) `pid` and every process under it have used so far, the ones already ended
 * included (a parent's cutime/cstime holds its reaped children's): e.g. a playground with its recordings'
 * encoder host and FFmpegs. Taken before and after a run, the difference is the run's.
 */
export function treeCpuSeconds(pid) {
  let ticks = 0;
  for (const p of [pid, ...descendants(pid)]) {
    try {
      const f = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    } catch {
      // it ended between the listing and the read: its time is its parent's cutime by now
    }
  }
  return ticks / 100;
}

/**
 * The CPU seconds so far of each thread of `pid` and of the processes under it: by process (its script's or
 * program's name) and thread (`main`, or the thread's name and id: Node's own threads are all named `node`),
 * with the processes already ended as `<process> (ended children)` (their parents' cutime/cstime). Two of
 * these subtracted say where a run's CPU went.
 */
export function threadCpuSeconds(pid) {
  const out = new Map();
  const add = (key, ticks) => out.set(key, (out.get(key) ?? 0) + ticks / 100);
  const read = (path) => readFileSync(path, 'utf8');
  for (const p of [pid, ...descendants(pid)]) {
    try {
      const argv = read(`/proc/${p}/cmdline`).split('\0').filter(Boolean);
      const proc = basename(argv.find((a) => /\.m?js$/.test(a)) ?? argv[0] ?? String(p));
      const stat = read(`/proc/${p}/stat`).split(') ')[1].split(' ');
      add(`${proc} (ended children)`, Number(stat[13]) + Number(stat[14]));
      for (const tid of readdirSync(`/proc/${p}/task`)) {
        const comm = read(`/proc/${p}/task/${tid}/comm`).trim();
        const f = read(`/proc/${p}/task/${tid}/stat`).split(') ')[1].split(' ');
        add(`${proc} ${Number(tid) === p ? 'main' : `${comm} ${tid}`}`, Number(f[11]) + Number(f[12]));
      }
    } catch {
      // it ended meanwhile
    }
  }
  return out;
}

/** The first process under this one whose command line contains `text` (e.g. `nats-server`), or undefined. */
export function descendantNamed(text) {
  return descendants(process.pid).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
    } catch {
      return false;
    }
  });
}

/** `usage` after minus before, per request: CPU in µs, reads and writes as counts. */
export function perRequest(before, after, requests) {
  return {
    cpuSeconds: after.cpuSeconds - before.cpuSeconds,
    us: ((after.cpuSeconds - before.cpuSeconds) / requests) * 1e6,
    reads: (after.reads - before.reads) / requests,
    writes: (after.writes - before.writes) / requests,
  };
}

/**
 * Sends `body` as JSON and returns the parsed answer (undefined when empty). Any status but 2xx throws, so a
 * benchmark never goes on measuring with set-up that silently failed.
 */
export async function sendJson(method, url, body) {
  const res = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url} answered ${res.status}: ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}

/**
 * Starts a test run of the agent's cases (`body`: `POST …/test-runs`'s) and waits for its end, asking every
 * `pollMs`; the finished run. Its start is the moment the run is asked for, so time it from before the call.
 */
export async function finishedRun(baseUrl, agentId, body, pollMs) {
  const started = await sendJson('POST', `${baseUrl}/api/agents/${agentId}/test-runs`, body);
  let run = started;
  while (run.finishedAt === null) {
    await new Promise((r) => setTimeout(r, pollMs));
    run = await sendJson('GET', `${baseUrl}/api/agents/${agentId}/test-runs/${started.id}`);
  }
  return run;
}

const AUTOCANNON = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  'node_modules/autocannon/autocannon.js',
);

/** Waits until the agent's latest deploy is live (a deploy goes live after its answer); throws if it fails. */
export async function deployLive(baseUrl, agentId, timeoutMs = 60_000) {
  const t0 = Date.now();
  for (;;) {
    const [d] = await sendJson('GET', `${baseUrl}/api/agents/${agentId}/deploys`);
    if (d.status === 'live') return;
    if (d.status === 'failed' || Date.now() - t0 > timeoutMs) throw new Error(`deploy ${d.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Runs autocannon (in its own process) against `url` for `seconds` with `connections`, a JSON `body` sent
 * with `method` when given, and resolves to req/s, p50/p99 ms, the request count and the refusals; with
 * `pids`, also each of those processes' CPU µs per request (steadier than req/s on a shared machine). A run
 * that met refusals says so next to its figures: a rate of refusals is not a rate of work.
 */
export function autocannon({ url, seconds, connections = 50, method, body, pids = [] }) {
  const args = [AUTOCANNON, '-c', String(connections), '-d', String(seconds), '-j'];
  if (method) args.push('-m', method);
  if (body) args.push('-H', 'content-type=application/json', '-b', body);
  args.push(url);
  const before = pids.map(usage);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', () => {
      try {
        const r = JSON.parse(out);
        if (r.non2xx > 0 || r.errors > 0) {
          console.log(
            `> ⚠ ${url}: ${r.non2xx} non-2xx answers, ${r.errors} errors — figures below are not valid`,
          );
        }
        const us = pids.map((pid, i) => perRequest(before[i], usage(pid), r.requests.total).us);
        resolve({
          rps: r.requests.average,
          p50: r.latency.p50,
          p99: r.latency.p99,
          total: r.requests.total,
          non2xx: r.non2xx,
          errors: r.errors,
          us,
          cpu: us.reduce((x, y) => x + y, 0),
        });
      } catch (err) {
        reject(err);
      }
    });
  });
}

/**
 * The testkit's OpenAI stub (the tests' own), answering at once or after `modelMs`: `reply(chat)` says what
 * it answers (`{ content }` or `{ tool: { name, args } }`; by default the test flow's, `fullFlow()`: the
 * testkit's `clinicScript`). Resolves to its base URL, what it served (`calls`, and `ms` on its side) and a
 * handle to close it. It keeps no requests: a benchmark makes thousands.
 */
export async function startModelStub({ modelMs = 0, reply } = {}) {
  const chat = reply
    ? (req) => {
        const r = reply(req);
        return { content: r.content, toolCalls: r.tool ? [r.tool] : undefined, delayMs: modelMs };
      }
    : (req) => ({ ...clinicScript(req), delayMs: modelMs });
  const stub = await startOpenAiStub({ chat, keepRequests: false });
  return { url: stub.baseURL, served: stub.served, server: { close: () => void stub.close() } };
}

/**
 * The voice benchmarks' chat and speech stubs in a process of their own (bench/voice-stubs.mjs): the speech
 * stub spawns espeak-ng and sox per request, and forks of a big process block its event loop. Resolves to their
 * URLs and a `close()`.
 */
export async function startVoiceStubs(root) {
  const child = spawn(process.execPath, [join(root, 'bench/voice-stubs.mjs')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the voice stubs exited ${code}`)));
    createInterface({ input: child.stdout }).once('line', resolve);
  });
  const { chatURL, speechURL } = JSON.parse(line);
  return { chatURL, speechURL, pid: child.pid, close: () => void child.kill('SIGTERM') };
}

/**
 * bench/voice-callers.mjs in a process of its own: `sessions` voice sessions of `agentId` at `url`, `turns`
 * spoken turns each, started at moments spread over one utterance (`stagger: 'off'`: all at once). `onConnected()` once they all talk; resolves to its result line (figures, talk time,
 * session ids, its own CPU) once it has exited.
 */
export async function runVoiceCallers(
  root,
  { url, agentId, sessions, turns, stagger = 'on', retry = 'off', onConnected = () => {} },
) {
  const args = ['--url', url, '--agent', agentId, '--sessions', String(sessions), '--turns', String(turns)];
  args.push('--stagger', stagger, '--retry', retry);
  const callers = spawn(process.execPath, [join(root, 'bench/voice-callers.mjs'), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => callers.once('exit', resolve));
  let result;
  for await (const line of createInterface({ input: callers.stdout })) {
    if (!line.startsWith('{')) continue;
    const msg = JSON.parse(line);
    if (msg.connected !== undefined) onConnected();
    if (msg.figures) result = msg;
  }
  await exited;
  if (!result) throw new Error('the callers did not finish');
  return result;
}
