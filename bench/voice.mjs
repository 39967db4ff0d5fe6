#!/usr/bin/env node
// Voice over the WebSocket, on this machine (docs/performance.md › Voice):
// 1. transport: what the gateway + the bus add per audio frame. A client streams 20 ms frames in real time to
//    the gateway's audio socket; an owner stand-in echoes each one from voice.<id>.in to voice.<id>.out. The
//    round trip (client → gateway → NATS → owner → NATS → gateway → client) against a bare ws echo server's
//    (client → server → client) on the same machine: half the difference is what one direction adds.
// 2. sessions: --sessions voice sessions on one playground instance (in this process: its event loop is the
//    one measured; the callers run in bench/voice-callers.mjs, a process of their own), each streaming real
//    speech (Festival's HTS voice) in real time with VAD and the end-of-turn model,
//    against instant chat/speech stubs (bench/voice-stubs.mjs, a process of their own): event-loop delay p50/p99 while they talk, heap and RSS per session,
//    V8's collector pauses (the tail of the delay is mostly them), and per turn `responseMs` (end of the user's speech → first audible agent audio) with the share LiveKit's
//    turn decision took (`endOfTurnDelayMs`) and the TTS stub's own time taken out: the turn overhead.
//    Preemptive generation is off unless `--preemptive on`: with it, LiveKit's model call starts inside the
//    end-of-turn wait, so taking the model's time out of `responseMs` would take out time that was not waited.
//    `--threads N` (N ≥ 2): the playground as a process with PLAYGROUND_THREADS=N runs it — N worker threads, each
//    an instance with its own event loop (bench/lib/voice-thread.mjs measures each inside it) — hosted by this
//    process as the playground's main thread hosts them; each thread's delay p50/p99 is reported, and the worst.
// Usage: npm run build && node bench/voice.mjs [--frames 250] [--sessions 50] [--turns 3] [--recordings off] [--stagger off] [--preemptive on] [--threads 2] [--pin on]
import { connectNats } from '@vab/bus';
import { liveSubject, ownerSubject, voiceInSubject, voiceOutSubject } from '@vab/contracts';
import { ensureEventsStream, loadConfig, PlaygroundThreads, startPlaygroundService } from '@vab/playground';
import { startLocalNats, startLocalRedis, voiceFlow } from '@vab/testkit';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { constants as perf, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pino } from 'pino';
import WebSocket, { WebSocketServer } from 'ws';
import {
  admissionOff,
  option,
  runVoiceCallers,
  sendJson,
  startCore,
  startVoiceStubs,
  voiceConfig,
} from './processes.mjs';
import { pct, root as here } from './lib/figures.mjs';

const FRAMES = option('frames', 250);
const SESSIONS = option('sessions', 50);
const TURNS = option('turns', 3);
/** `--recordings off`: the sessions unrecorded (RECORDINGS=off), for an A/B of what recording costs them. */
const RECORDINGS = option('recordings', 'on');
/** `--stagger off`: every caller's turns at the same instant (a burst) instead of spread as callers are. */
const STAGGER = option('stagger', 'on');
/** `--preemptive on`: the agent's default, LiveKit's preemptive generation (the turn overhead is then not meaningful). */
const PREEMPTIVE = option('preemptive', 'off');
/** `--threads N`: the playground on N worker threads (PLAYGROUND_THREADS), each measured inside it. */
const THREADS = option('threads', 1);
/**
 * `--pin on` (Linux, util-linux's taskset): everything this bench starts runs on the second core, and the
 * playground's process (this one: its event loop, the VAD's pool, the collector's helpers), once the callers
 * are connected, on the first alone: the playground with a core to itself while the rest share the other.
 */
const PIN = option('pin', 'off');
function pinTo(core) {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(core), String(process.pid)], { stdio: 'ignore' });
  } catch (err) {
    throw new Error(`--pin on needs taskset (util-linux) and two cores (0 and 1): ${err.message}`, {
      cause: err,
    });
  }
}
// before anything starts, so that every process it starts inherits the second core (the transport's figure is
// then one core's)
if (PIN === 'on') pinTo(1);
const log = pino({ level: 'silent' });

const fmt = (x) => (Number.isFinite(x) ? x.toFixed(2) : '—');

const nats = await startLocalNats();
const redis = await startLocalRedis();
const env = { NATS_URL: nats.url, REDIS_URL: redis.url };
const core = await startCore(here, env, {
  RATE_LIMIT_MAX: '1000000000',
  SESSION_RATE_LIMIT_MAX: '1000000000',
});
const nc = await connectNats({ url: nats.url, name: 'bench', service: 'playground' }, log);
const cleanup = async () => {
  for (const p of core.procs) p.kill();
  await nc.close().catch(() => undefined);
  await nats.stop();
  await redis.stop();
};

/** Streams FRAMES frames in real time, each stamped, and times each one's return. */
async function roundTrips(url, onOpen) {
  const ws = new WebSocket(url);
  const rtts = [];
  await new Promise((resolve, reject) => {
    ws.on('error', reject);
    ws.on('message', (data, isBinary) => {
      if (!isBinary) {
        if (JSON.parse(String(data)).type === 'ready') resolve();
        return;
      }
      const sent = Buffer.from(data).readDoubleLE(0);
      rtts.push(performance.now() - sent);
    });
    ws.on('open', () => onOpen?.(resolve));
  });
  const frame = Buffer.alloc(640);
  for (let i = 0; i < FRAMES; i++) {
    frame.writeDoubleLE(performance.now(), 0);
    ws.send(frame);
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 200));
  ws.close();
  return rtts;
}

async function transport() {
  // the owner stand-in: answers the attach, echoes every frame
  const sessionId = 'bench-voice-session';
  const agent = await sendJson('POST', `${core.url}/api/agents`, {
    name: 'bench',
    flow: { nodes: [], edges: [] },
  });
  const control = natsHeaders();
  control.set('Voice-Control', '1');
  nc.subscribe(ownerSubject(sessionId, 'attach'), {
    callback: (_e, msg) => {
      msg.respond(JSON.stringify({ sampleRate: 16000, frameBytes: 640 }));
      nc.publish(voiceOutSubject(sessionId), JSON.stringify({ type: 'ready' }), { headers: control });
    },
  });
  // it runs the session, as far as the gateway's event feed asks
  nc.subscribe(liveSubject(sessionId), { callback: (_e, msg) => msg.respond() });
  nc.subscribe(voiceInSubject(sessionId), {
    callback: (_e, msg) => nc.publish(voiceOutSubject(sessionId), msg.data),
  });
  await ensureEventsStream(nc, loadConfig({}), log);
  const viaGateway = await roundTrips(
    `${core.url.replace('http', 'ws')}/api/agents/${agent.id}/voice-sessions/${sessionId}/audio`,
  );
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  wss.on('connection', (s) => {
    s.send(JSON.stringify({ type: 'ready' }));
    s.on('message', (d, isBinary) => isBinary && s.send(d));
  });
  await new Promise((r) => wss.once('listening', r));
  const bare = await roundTrips(`ws://127.0.0.1:${wss.address().port}/`);
  wss.close();
  console.log('\n### Audio transport: one 20 ms frame (640 B), round trip\n');
  console.log('| path | frames | p50 ms | p99 ms |');
  console.log('| --- | --- | --- | --- |');
  console.log(
    `| client → gateway → NATS → owner → NATS → gateway → client | ${viaGateway.length} | ${fmt(pct(viaGateway, 50))} | ${fmt(pct(viaGateway, 99))} |`,
  );
  console.log(
    `| client → bare ws echo → client | ${bare.length} | ${fmt(pct(bare, 50))} | ${fmt(pct(bare, 99))} |`,
  );
  console.log(
    `\nwhat the gateway + bus add per frame, one direction (half the p50 difference): **${fmt((pct(viaGateway, 50) - pct(bare, 50)) / 2)} ms**`,
  );
}

async function sessions() {
  // in a process of their own: the TTS stub's espeak-ng forks are not the playground's
  const stubs = await startVoiceStubs(here);
  const playground = THREADS > 1 ? await startThreads() : await startInProcess();
  const agent = await sendJson('POST', `${core.url}/api/agents`, {
    name: 'bench voice',
    flow: voiceFlow({
      chatURL: stubs.chatURL,
      speechURL: stubs.speechURL,
      agent: { minEndpointingDelay: 500, preemptiveGeneration: PREEMPTIVE === 'on' },
    }),
  });
  // the callers run in a process of their own: this one's event loop and memory are the playground's
  const heapBefore = process.memoryUsage();
  playground.markHeap?.();
  const delay = monitorEventLoopDelay({ resolution: 5 });
  let probes;
  // the collector's pauses while they talk: what the event loop's tail is mostly made of
  const gcPauses = [];
  const gc = new PerformanceObserver((list) => {
    if (talkFrom > 0)
      for (const e of list.getEntries()) gcPauses.push({ ms: e.duration, kind: e.detail?.kind });
  });
  gc.observe({ entryTypes: ['gc'] });
  let cpuFrom;
  let talkFrom = 0;
  const result = await runVoiceCallers(here, {
    url: core.url,
    agentId: agent.id,
    sessions: SESSIONS,
    turns: TURNS,
    stagger: STAGGER,
    retry: THREADS > 1 ? 'on' : 'off',
    onConnected: () => {
      if (PIN === 'on') pinTo(0);
      probes = playground.probe?.();
      delay.enable();
      cpuFrom = process.cpuUsage();
      talkFrom = performance.now();
    },
  });
  delay.disable();
  gc.disconnect();
  const threads = probes ? await probes() : undefined;
  // with threads, the collectors that matter are theirs (this process's main thread only supervises)
  if (threads) gcPauses.splice(0, gcPauses.length, ...threads.flatMap((t) => t.pauses));
  // the playground's CPU while the callers talk (less contended by the machine's load than the delays)
  const cpu = process.cpuUsage(cpuFrom);
  const cpuShare = (cpu.user + cpu.system) / 1000 / (performance.now() - talkFrom);
  const heapAfter = process.memoryUsage();
  const { figures, talkSeconds } = result;
  const response = figures.map((m) => m.responseMs);
  const overhead = figures
    .filter((m) => m.endOfTurnDelayMs !== undefined)
    .map((m) => m.responseMs - m.endOfTurnDelayMs - (m.ttsTtfbMs ?? 0) - (m.llmTtftMs ?? 0));
  console.log(
    `\n### ${SESSIONS} voice sessions on one playground ${THREADS > 1 ? `process, ${THREADS} threads` : 'instance'}, ${TURNS} spoken turns each (${talkSeconds.toFixed(0)} s, turns ${STAGGER === 'on' ? 'staggered' : 'all at once'}, recordings ${RECORDINGS}, preemptive generation ${PREEMPTIVE})\n`,
  );
  console.log('| figure | p50 | p99 |');
  console.log('| --- | --- | --- |');
  printDelays(delay, threads);
  console.log(`| playground CPU per session, % of a core | ${fmt((cpuShare / SESSIONS) * 100)} | |`);
  const gcKinds = [
    ['scavenge', perf.NODE_PERFORMANCE_GC_MINOR],
    ['mark-compact', perf.NODE_PERFORMANCE_GC_MAJOR],
    ['incremental marking', perf.NODE_PERFORMANCE_GC_INCREMENTAL],
  ];
  for (const [name, kind] of [['all', undefined], ...gcKinds]) {
    const ms = gcPauses.filter((p) => kind === undefined || p.kind === kind).map((p) => p.ms);
    if (ms.length === 0) continue;
    console.log(
      `| GC pause (${name}), ms (${ms.length}, ${fmt(ms.reduce((a, b) => a + b, 0))} ms in all; max ${fmt(Math.max(...ms))}) | ${fmt(pct(ms, 50))} | ${fmt(pct(ms, 99))} |`,
    );
  }
  console.log(
    `| responseMs (end of speech → first audible agent audio) | ${fmt(pct(response, 50))} | ${fmt(pct(response, 99))} |`,
  );
  console.log(
    `| turn overhead (responseMs − endOfTurnDelayMs − LLM TTFT − TTS TTFB) | ${fmt(pct(overhead, 50))} | ${fmt(pct(overhead, 99))} |`,
  );
  const heapDelta = threads
    ? threads.reduce((n, t) => n + t.heapDelta, 0)
    : heapAfter.heapUsed - heapBefore.heapUsed;
  console.log(
    `\nturns measured: ${figures.length} of ${SESSIONS * TURNS}; heap +${(heapDelta / SESSIONS / 1024).toFixed(0)} KB and RSS +${((heapAfter.rss - heapBefore.rss) / SESSIONS / 1024 / 1024).toFixed(1)} MB per session (the playground's process)`,
  );
  await playground.stop();
  stubs.close();
}

/** The event-loop delay rows: this process's, or each thread's, the worst, and the supervising main thread's. */
function printDelays(delay, threads) {
  const own = `${fmt(delay.percentile(50) / 1e6)} | ${fmt(delay.percentile(99) / 1e6)} |`;
  if (!threads) return console.log(`| event-loop delay, ms | ${own}`);
  for (const t of threads)
    console.log(
      `| event-loop delay, thread ${t.thread} (${t.peakSessions} sessions at most), ms | ${fmt(t.p50)} | ${fmt(t.p99)} |`,
    );
  const worst = threads.reduce((a, b) => (b.p99 > a.p99 ? b : a));
  console.log(
    `| event-loop delay, worst thread (${worst.thread}), ms | ${fmt(worst.p50)} | ${fmt(worst.p99)} |`,
  );
  console.log(`| event-loop delay, main thread (supervising only), ms | ${own}`);
}

/** The playground in this process, on its event loop (the one measured). */
async function startInProcess() {
  const service = startPlaygroundService({ nc, log, config: voiceConfig(loadConfig, SESSIONS, RECORDINGS) });
  await service.ready;
  return { stop: () => service.stop(5000) };
}

/**
 * The playground on THREADS worker threads, as its process runs them (PLAYGROUND_THREADS), this process their
 * main thread; `probe()` starts measuring inside each and returns what resolves to each thread's figures.
 */
async function startThreads() {
  const env = {
    PATH: process.env.PATH,
    NATS_URL: nats.url,
    PLAYGROUND_THREADS: String(THREADS),
    FLOW_EGRESS_ALLOW: '127.0.0.1',
    ...admissionOff(),
    MAX_SESSIONS: String(SESSIONS + 5),
    MAX_SESSIONS_PER_CALLER: String(SESSIONS + 5),
    RECORDINGS,
    VOICE_INPUT_IDLE_MS: '30000',
    LOG_LEVEL: 'error',
    SHUTDOWN_TIMEOUT_MS: '10000',
  };
  const answers = new Map();
  const threads = new PlaygroundThreads({
    config: loadConfig(env),
    env,
    // a thread that fails is said on stderr (the playground's own lines go there too, at error)
    log: pino({ level: 'warn' }, pino.destination(2)),
    write: (line) => process.stderr.write(line),
    script: join(here, 'bench/lib/voice-thread.mjs'),
    onMessage: (thread, msg) => answers.get(thread)?.({ thread, ...msg }),
  });
  await threads.start();
  const indexes = Array.from({ length: THREADS }, (_, i) => i);
  return {
    markHeap: () => indexes.forEach((i) => threads.post(i, { type: 'heap-mark' })),
    probe() {
      for (const i of indexes) threads.post(i, { type: 'probe-start' });
      return () =>
        Promise.all(
          indexes.map(
            (i) =>
              new Promise((resolve) => {
                answers.set(i, resolve);
                threads.post(i, { type: 'probe-stop' });
              }),
          ),
        );
    },
    stop: () => threads.stop('benchmark done', 'drain'),
  };
}

try {
  await transport();
  if (SESSIONS > 0) await sessions();
} finally {
  await cleanup();
}
process.exit(0);
