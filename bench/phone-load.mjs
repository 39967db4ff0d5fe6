#!/usr/bin/env node
// Issue 46's load figure: --calls concurrent phone calls on ONE playground instance (a process of its own, with
// recordings on), the way Twilio makes them: a stub Twilio (packages/testkit's TwilioCaller, Media Streams
// exactly, as tests/integration/voice/telephony.test.ts uses it) rings a number of a live agent through the
// signed voice webhook, follows the TwiML's Stream, answers marks as its line plays, and speaks real speech
// (espeak-ng at 8 kHz, as μ-law 20 ms frames in real time). The calls start spread over --ramp seconds and all
// overlap; each hears its greeting, then says --turns turns, each answered, then hangs up.
// The rest of the stack runs as processes (gateway, agents, sessions, telephony, the chat and speech stubs of
// bench/voice-stubs.mjs); the callers run in this process.
// Prints: the instance's event-loop delay p99 (its /metrics, which prom-client resets at each scrape: scraped
// every 5 s while the calls talk; the worst window and the median of the windows), lost calls (no stream, no
// greeting, a turn unanswered, a socket closed by the far side, a call not listed ended with its recording), and
// the turn figures (greeting after `start`, response felt: end of the caller's speech in the μ-law stream → the
// first audible sample of the reply; the endpointing wait and the stubs' time are in it).
// --threads N runs the instance's sessions on N worker threads (PLAYGROUND_THREADS, decision 37): each window's
// figure is then the worst thread's event-loop p99. --window 0 scrapes once at the end: one p99 over the whole
// run. The figure is prom-client's: Node's histogram records each 10 ms timer's whole period (an idle loop reads
// 10 ms), so the table also says how late that is beyond the period (what Elastic's APM agent reports, and what
// the instance's own admission reads, sessions/load.ts).
// CPU per call-second: what each process (the playground with its encoders, telephony, gateway, NATS, …) used
// from the first call's ring to the last call's end, over the calls' summed seconds (ring → hang-up): ms of CPU
// per second of one call, steadier than the event loop's figures on a shared machine (10 = 1 % of a core a call).
// --by-thread also splits the playground's CPU per call-second by process and thread (main thread, libuv's pool,
// LiveKit's FFI threads, the encoders, …). --prof <dir> writes the playground's and telephony's V8 CPU profiles there (node --cpu-prof; open in Chrome's
// DevTools or speedscope), written when each process exits at the end.
// Usage: npm run build && node bench/phone-load.mjs [--calls 50] [--turns 2] [--ramp 10] [--threads 1] [--window 5] [--prof <dir>]
import { freePort, postTwilioWebhook, speak, streamOf, TwilioCaller, voiceFlow } from '@vab/testkit';
import { join, resolve } from 'node:path';
import { loadavg } from 'node:os';
import { pct, root, sleep } from './lib/figures.mjs';
import {
  admissionOff,
  descendantNamed,
  flag,
  option,
  sendJson,
  startCoreStack,
  startProcess,
  startVoiceStubs,
  threadCpuSeconds,
  treeCpuSeconds,
} from './processes.mjs';

const CALLS = option('calls', 50);
const TURNS = option('turns', 2);
const RAMP_S = option('ramp', 10);
const THREADS = option('threads', 1);
const WINDOW_S = option('window', 5);
const PROF_DIR = option('prof', '');
const BY_THREAD = flag('by-thread');
// --node-args "<flags>": more flags for both (e.g. "--perf-basic-prof --no-logfile-per-isolate --logfile=/dev/null",
// for `perf record -p <pid>` by function)
const profArgs = [
  ...(PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${resolve(PROF_DIR)}`] : []),
  ...option('node-args', '').split(' ').filter(Boolean),
];
/** prom-client's default eventLoopMonitoringPrecision: the period of the timer Node's histogram samples with. */
const SAMPLING_MS = 10;
const ENDPOINTING_MS = 500;
const AUTH_TOKEN = 'bench-twilio-auth-token-0123456789';

/** Whole ms (the shared `fmt` prints one decimal). */
const fmt = (x) => (Number.isFinite(x) ? x.toFixed(0) : '—');
/** Polls `done` every 10 ms until it holds; false after `ms`. */
async function until(done, ms) {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) return false;
    await sleep(10);
  }
  return true;
}

const core = await startCoreStack(root, { LIVE_MAX_CALLS_PER_ADDRESS: String(CALLS + 10) });
const stubs = await startVoiceStubs(root);
const telPort = await freePort();
const telephony = await startProcess(
  join(root, 'services/telephony/dist/main.js'),
  {
    ...core.env,
    LOG_LEVEL: 'info',
    TWILIO_AUTH_TOKEN: AUTH_TOKEN,
    TELEPHONY_PORT: String(telPort),
    TELEPHONY_HOST: '127.0.0.1',
  },
  'telephony listening',
  profArgs,
);
const metricsPort = await freePort();
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  {
    ...core.env,
    LOG_LEVEL: 'info',
    INSTANCE_ID: 'bench-phone-load',
    METRICS_PORT: String(metricsPort),
    METRICS_HOST: '127.0.0.1',
    FLOW_EGRESS_ALLOW: '127.0.0.1',
    MAX_SESSIONS: String(CALLS + 10),
    MAX_SESSIONS_PER_CALLER: String(CALLS + 10),
    RECORDINGS: 'on',
    PLAYGROUND_THREADS: String(THREADS),
    // the instance's admission by load is off (as in the other benchmarks: what the load costs is measured);
    // LOAD_MAX_EVENT_LOOP_P99_MS=… (and LOAD_MAX_BEHIND_MS, LOAD_MAX_CPU_PERCENT, LOAD_OVER_FOR_MS) in the environment
    // puts it back; its refusals are counted apart (busy)
    ...admissionOff(),
    ...(process.env.LOAD_OVER_FOR_MS ? { LOAD_OVER_FOR_MS: process.env.LOAD_OVER_FOR_MS } : {}),
  },
  THREADS > 1 ? 'playground threads up' : 'playground instance up',
  profArgs,
);
const metrics = `http://127.0.0.1:${metricsPort}/metrics`;
async function loopP99() {
  const text = await (await fetch(metrics)).text();
  // one line per thread on a threaded instance (labelled thread="<i>"; the supervising thread's too): the worst
  const lags = [...text.matchAll(/^nodejs_eventloop_lag_p99_seconds(?:\{[^}]*\})? ([0-9.e+-]+)$/gm)];
  return lags.length > 0 ? Math.max(...lags.map((m) => Number(m[1]) * 1000)) : NaN;
}

const lost = [];
/** Calls answered "busy" (TwiML <Say> + <Hangup/>): a documented refusal, not a lost call. */
let refused = 0;
const greetMs = [];
const responseMs = [];
/** Each call's seconds from its ring to its end (the CPU figures' denominator). */
let callSeconds = 0;

/** One phone call: rings, greets, talks TURNS turns, hangs up. Resolves to its CallSid, or records it lost. */
async function phoneCall(c, number, utterance, speechMs) {
  const rang = Date.now();
  try {
    return await talk(c, number, utterance, speechMs);
  } finally {
    callSeconds += (Date.now() - rang) / 1000;
  }
}

async function talk(c, number, utterance, speechMs) {
  const callSid = `CA${String(c + 1).padStart(32, '0')}`;
  const answer = await postTwilioWebhook(`http://127.0.0.1:${telPort}/telephony/twilio/voice`, AUTH_TOKEN, {
    CallSid: callSid,
    AccountSid: 'AC00000000000000000000000000000000',
    From: `+1415555${String(1000 + c).padStart(4, '0')}`,
    To: number,
    CallStatus: 'ringing',
    Direction: 'inbound',
  });
  const stream = streamOf(answer.body);
  if (!stream && /<Hangup\/>/.test(answer.body)) return void refused++;
  if (!stream) return void lost.push(`${c}: no stream (${answer.body.slice(0, 80)})`);
  const caller = new TwilioCaller({
    url: stream.url,
    authToken: AUTH_TOKEN,
    callSid,
    parameters: stream.parameters,
  });
  let farClosed;
  void caller.closed.then((x) => (farClosed ??= x));
  try {
    await caller.opened;
    if (!(await until(() => caller.segments[0]?.audibleAt !== undefined || farClosed, 20_000)) || farClosed)
      return void lost.push(`${c}: no greeting${farClosed ? ` (closed ${farClosed.code})` : ''}`);
    greetMs.push(caller.segments[0].audibleAt);
    for (let t = 0; t < TURNS; t++) {
      if (
        !(await until(() => (!caller.playing && caller.micQueuedMs === 0) || farClosed, 30_000)) ||
        farClosed
      )
        return void lost.push(`${c}: the agent kept speaking or the line closed`);
      const before = caller.segments.length;
      // where the speech starts in the stream (the next frame), not the wall clock: with 50 callers' ticks in
      // one process a tick runs late, and the end would be dated late, the response understated
      const endAt = caller.streamMs + speechMs;
      caller.say(utterance);
      if (
        !(await until(() => caller.segments[before]?.audibleAt !== undefined || farClosed, 30_000)) ||
        farClosed
      )
        return void lost.push(
          `${c}: turn ${t + 1} unanswered${farClosed ? ` (closed ${farClosed.code})` : ''}`,
        );
      responseMs.push(caller.segments[before].audibleAt - endAt);
    }
    await until(() => !caller.playing || farClosed, 30_000);
    caller.hangUp();
    await caller.closed;
    return callSid;
  } catch (err) {
    lost.push(`${c}: ${err.message}`);
  }
}

try {
  const agent = await sendJson('POST', `${core.url}/api/agents`, {
    name: 'bench phone load',
    flow: voiceFlow({
      chatURL: stubs.chatURL,
      speechURL: stubs.speechURL,
      agent: { turnDetection: 'vad', minEndpointingDelay: ENDPOINTING_MS, preemptiveGeneration: false },
    }),
  });
  const deploy = await sendJson('POST', `${core.url}/api/agents/${agent.id}/deploys`, {
    maxConcurrentCalls: CALLS + 10,
  });
  for (let i = 0; ; i++) {
    const list = await sendJson('GET', `${core.url}/api/agents/${agent.id}/deploys`);
    if (list.find((d) => d.id === deploy.id)?.status === 'live') break;
    if (i > 300) throw new Error('the deploy did not go live');
    await sleep(100);
  }
  const number = '+14155550100';
  await sendJson('POST', `${core.url}/api/phone-numbers`, { number, provider: 'twilio', agentId: agent.id });

  // espeak-ng at the line's rate, and where its sound ends (its tail is silence)
  const utterance = speak('I would like to book a table for two tonight.', { sampleRate: 8000 });
  let last = utterance.length - 1;
  while (last > 0 && Math.abs(utterance[last]) < 500) last--;
  const speechMs = (last + 1) / 8;

  // what each process has used before the calls (the CPU figures count the calls' part)
  const measured = {
    playground: playground.pid,
    telephony: telephony.pid,
    gateway: core.gateway.pid,
    'agents + sessions': [core.agents.pid, core.sessions.pid],
    'nats-server': descendantNamed('nats-server'),
    'redis-server': descendantNamed('redis-server'),
    'chat and speech stubs': stubs.pid,
  };
  const cpuOf = (pids) => [pids].flat().reduce((sum, pid) => sum + (pid ? treeCpuSeconds(pid) : 0), 0);
  const cpuBefore = Object.fromEntries(Object.entries(measured).map(([name, pids]) => [name, cpuOf(pids)]));
  const benchBefore = process.cpuUsage();
  const threadsBefore = BY_THREAD ? threadCpuSeconds(playground.pid) : undefined;

  await loopP99(); // resets the instance's window: what follows is the calls'
  const windows = [];
  let talking = true;
  const sampler = (async () => {
    while (talking && WINDOW_S > 0) {
      await sleep(WINDOW_S * 1000);
      if (talking) windows.push(await loopP99());
    }
  })();
  const t0 = Date.now();
  const calls = [];
  for (let c = 0; c < CALLS; c++) {
    calls.push(phoneCall(c, number, utterance, speechMs));
    await sleep((RAMP_S * 1000) / CALLS);
  }
  const ended = (await Promise.all(calls)).filter(Boolean).length;
  const cpuAfter = Object.fromEntries(Object.entries(measured).map(([name, pids]) => [name, cpuOf(pids)]));
  const benchCpu = process.cpuUsage(benchBefore);
  const threadsAfter = BY_THREAD ? threadCpuSeconds(playground.pid) : undefined;
  talking = false;
  windows.push(await loopP99());
  await sampler;
  const wallS = (Date.now() - t0) / 1000;

  // each call that talked is listed ended, with its recording (stored once the call ends)
  let stored = 0;
  let listed;
  for (let i = 0; i < 100; i++) {
    listed = await sendJson('GET', `${core.url}/api/agents/${agent.id}/calls?channel=phone&limit=100`);
    stored = listed.calls.filter((x) => x.status === 'ended' && x.recording !== null).length;
    if (stored >= ended) break;
    await sleep(200);
  }
  // why the calls ended, as their records say (a lost call's reason is the instance's, not the caller's)
  const endedBy = new Map();
  for (const x of listed?.calls ?? []) endedBy.set(x.endedReason, (endedBy.get(x.endedReason) ?? 0) + 1);

  console.log(
    `${CALLS} concurrent phone calls on one playground instance (recordings on, ${THREADS} thread${THREADS > 1 ? 's' : ''}), started over ${RAMP_S} s, ` +
      `${TURNS} espeak-ng turns each, ${wallS.toFixed(0)} s; load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
  );
  console.log('| what | figure |');
  console.log('|---|---|');
  const late = (ms) => fmt(Math.max(0, ms - SAMPLING_MS));
  if (WINDOW_S > 0)
    console.log(
      `| the instance's event-loop delay p99, ms (${WINDOW_S} s windows: worst / median, ${windows.length} windows; ` +
        `late beyond the ${SAMPLING_MS} ms sampling period) | ${fmt(Math.max(...windows))} / ${fmt(pct(windows, 50))} ` +
        `(${late(Math.max(...windows))} / ${late(pct(windows, 50))}) |`,
    );
  else
    console.log(
      `| the instance's event-loop delay p99 over the run, ms (late beyond the ${SAMPLING_MS} ms sampling period) | ` +
        `${fmt(windows[0])} (${late(windows[0])}) |`,
    );
  console.log(`| calls completed / refused busy / lost | ${ended} / ${refused} / ${lost.length} |`);
  console.log(`| calls listed ended with a recording | ${stored} |`);
  console.log(
    `| calls' endedReason | ${[...endedBy].map(([reason, n]) => `${reason ?? 'none'} ${n}`).join(', ')} |`,
  );
  console.log(
    `| greeting (start → first audible sample), p50 / p99 ms | ${fmt(pct(greetMs, 50))} / ${fmt(pct(greetMs, 99))} |`,
  );
  console.log(
    `| response felt (${responseMs.length} turns; ${ENDPOINTING_MS} ms endpointing and the stubs in it), p50 / p99 ms | ` +
      `${fmt(pct(responseMs, 50))} / ${fmt(pct(responseMs, 99))} |`,
  );
  // CPU per call-second: ms of CPU per second of one call, each process and the whole stack
  const perCallS = (seconds) => ((seconds * 1000) / callSeconds).toFixed(2);
  const rows = Object.keys(measured).map((name) => [name, cpuAfter[name] - cpuBefore[name]]);
  rows.push(['this bench (the stub callers)', (benchCpu.user + benchCpu.system) / 1e6]);
  console.log(
    `| CPU per call-second, ms (${callSeconds.toFixed(0)} call-seconds): ` +
      `${rows.map(([name]) => name).join(' / ')} | ${rows.map(([, s]) => perCallS(s)).join(' / ')} |`,
  );
  console.log(
    `| CPU per call-second, ms, the stack without the bench's callers | ${perCallS(
      rows.slice(0, -1).reduce((sum, [, s]) => sum + s, 0),
    )} |`,
  );
  if (threadsAfter) {
    const split = [...threadsAfter]
      .map(([name, s]) => [name, s - (threadsBefore.get(name) ?? 0)])
      .filter(([, s]) => s > 0)
      .sort((a, b) => b[1] - a[1]);
    // the threads under 1 % of the playground's total are summed into one line
    const total = split.reduce((sum, [, s]) => sum + s, 0);
    const small = split.filter(([, s]) => s < total / 100);
    for (const [name, s] of split.filter(([, s]) => s >= total / 100))
      console.log(`| playground's tree: ${name} | ${perCallS(s)} |`);
    if (small.length > 0)
      console.log(
        `| playground's tree: ${small.length} more threads | ${perCallS(small.reduce((sum, [, s]) => sum + s, 0))} |`,
      );
  }
  // why calls were lost, counted by reason (the call's number left out)
  const reasons = new Map();
  for (const why of lost) {
    const reason = why.replace(/^\d+: /, '').slice(0, 80);
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  }
  for (const [reason, n] of reasons) console.log(`lost ${n}: ${reason}`);
} finally {
  // with --prof, the profiles are written as the two exit
  const exited = [playground, telephony].map((p) => new Promise((r) => p.once('exit', r)));
  playground.kill();
  telephony.kill();
  if (PROF_DIR) await Promise.all(exited);
  for (const p of core.procs) p.kill();
  stubs.close();
  await core.nats.stop();
  await core.redis.stop();
}
