#!/usr/bin/env node
// Simulated callers by voice at scale (docs/performance.md › Simulated callers by voice): `--cases` voice cases
// × `--repeat` attempts × `--turns` caller turns, one test run through the gateway on ONE playground instance
// (a process of its own), every attempt a spoken call in real time: the caller's lines spoken by the speech
// stub (espeak-ng), streamed into the flow's voice pipeline (VAD, end-of-turn model, STT, LLM, TTS), the
// agent's audio played back and heard through the caller's STT. A mix of behaviours: plain callers, pauses
// mid-sentence, background noise, barge-ins. Prints the run's wall time, the turn overhead of the voice issue
// under that load (responseMs − endOfTurnDelayMs − LLM TTFT − TTS TTFB, from the pipeline's per-turn figures),
// the response time the callers measured from the audio, and the playground's CPU.
// Usage: npm run build && node bench/voice-simulations.mjs [--cases 10] [--repeat 3] [--turns 4]
//   [--concurrency 30] [--cpu-prof <dir>]
import { join } from 'node:path';
import { freePort, startSpeechStub, voiceFlow } from '@vab/testkit';
import {
  finishedRun,
  option,
  sendJson,
  startCoreStack,
  startModelStub,
  startProcess,
  usage,
} from './processes.mjs';
import { root } from './lib/figures.mjs';

const CASES = option('cases', 10);
const REPEAT = option('repeat', 3);
const TURNS = option('turns', 4);
const CONCURRENCY = option('concurrency', CASES * REPEAT);
/** `--cpu-prof <dir>`: a V8 CPU profile of the playground process, written there when it exits. */
const CPU_PROF = option('cpu-prof', '');

const LINES = [
  'Hello, I would like to book a table for two people.',
  'Tomorrow evening at seven, if that is possible.',
  'My name is Ada Lovelace, and my number is five five five.',
  'Thank you, that is all I needed.',
];

/** Agent: a short answer; the caller: its lines in order (the run's `maxTurns` ends the call). */
function reply(chat) {
  const tools = (chat.tools ?? []).map((t) => t.function.name);
  if (tools.includes('end_call')) {
    const said = chat.messages.filter((m) => m.role === 'assistant').length;
    return { content: LINES[said % LINES.length] };
  }
  return { content: 'Sure, noted. Anything else?' };
}

const { url: chatURL, server: chat } = await startModelStub({ reply });
const speech = await startSpeechStub({ transcribe: () => 'I would like to book a table for two.' });

const core = await startCoreStack(root, {
  TEST_RUN_CONCURRENCY: String(CONCURRENCY),
  TEST_CASE_TIMEOUT_MS: '300000',
  TEST_CASE_RETRIES: '0',
});
const { url: base, procs, nats, redis, env } = core;
const metricsPort = await freePort();
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  {
    ...env,
    LOG_LEVEL: 'info',
    INSTANCE_ID: 'bench-1',
    MAX_SESSIONS: String(CONCURRENCY + 5),
    METRICS_PORT: String(metricsPort),
  },
  'playground instance up',
  CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', CPU_PROF] : [],
);
/** The playground's event-loop delay since the last scrape (prom-client resets it on each collection), ms. */
async function eventLoop() {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const read = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]) * 1000;
  return { p50: read('nodejs_eventloop_lag_p50_seconds'), p99: read('nodejs_eventloop_lag_p99_seconds') };
}
const cleanup = async () => {
  const exited = new Promise((r) => playground.once('exit', r));
  for (const p of [...procs, playground]) p.kill();
  // its CPU profile is written as it exits
  if (CPU_PROF) await exited;
  chat.close();
  await speech.close();
  await nats.stop();
  await redis.stop();
};

try {
  const flow = voiceFlow({ chatURL, speechURL: speech.baseURL, agent: { minEndpointingDelay: 500 } });
  const agent = await sendJson('POST', `${base}/api/agents`, { name: 'Bench voice calls', flow });
  const behaviours = [
    {},
    {},
    {},
    {},
    { midSentencePause: { ms: 800, chance: 0.5 } },
    { midSentencePause: { ms: 800, chance: 0.5 } },
    { noise: { snrDb: 20 } },
    { noise: { snrDb: 20 } },
    { bargeIn: { afterMs: 800, chance: 0.5 } },
    { silenceBeforeAnswer: { ms: 1500, chance: 0.5 } },
  ];
  for (let i = 0; i < CASES; i++) {
    await sendJson('POST', `${base}/api/agents/${agent.id}/test-cases`, {
      name: `voice case ${i}`,
      simulation: {
        persona: 'A diner booking a table.',
        goal: 'Book a table.',
        maxTurns: TURNS,
        voice: { behaviour: behaviours[i % behaviours.length] },
      },
      repeat: REPEAT,
    });
  }
  console.log(
    `# voice simulated test run: ${CASES} cases × repeat ${REPEAT} × ${TURNS} caller turns, 1 playground ` +
      `instance, TEST_RUN_CONCURRENCY=${CONCURRENCY}, chat stub answering at once, espeak-ng speech stub`,
  );
  await eventLoop();
  const cpu0 = usage(playground.pid).cpuSeconds;
  const t0 = performance.now();
  const run = await finishedRun(base, agent.id, { apiKeys: { openai: 'sk-bench' } }, 500);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = usage(playground.pid).cpuSeconds - cpu0;
  const loop = await eventLoop();
  const attempts = run.cases.flatMap((c) => c.repeats);
  const observed = attempts.map((a) => a.observed).filter(Boolean);
  const turns = observed.reduce((n, o) => n + o.userTurns.length, 0);
  const pct = (xs, p) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
  };
  const fmt = (x) => (Number.isFinite(x) ? x.toFixed(0) : '—');
  const metrics = observed.flatMap((o) => o.metrics).filter((m) => m.responseMs !== undefined);
  const overhead = metrics
    .filter((m) => m.endOfTurnDelayMs !== undefined)
    .map((m) => m.responseMs - m.endOfTurnDelayMs - (m.ttsTtfbMs ?? 0) - (m.llmTtftMs ?? 0));
  const heardResponse = observed
    .flatMap((o) => o.voice?.turns ?? [])
    .map((t) => t.responseMs)
    .filter((x) => x !== null);
  const verdicts = attempts.reduce((n, a) => ({ ...n, [a.verdict]: (n[a.verdict] ?? 0) + 1 }), {});
  const errors = [...new Set(attempts.map((a) => a.error).filter(Boolean))];
  console.log(
    '\n| attempts | caller turns | wall time | run status | attempts by verdict | playground CPU |',
  );
  console.log('|---|---|---|---|---|---|');
  console.log(
    `| ${attempts.length} | ${turns} | ${seconds.toFixed(1)} s | ${run.status} | ${JSON.stringify(verdicts)} | ` +
      `${cpu.toFixed(0)} s (${((cpu / seconds) * 100).toFixed(0)} % of one core) |`,
  );
  console.log('\n| figure (ms) | turns | p50 | p99 |');
  console.log('|---|---|---|---|');
  console.log(
    `| turn overhead (responseMs − endOfTurnDelayMs − LLM TTFT − TTS TTFB) | ${overhead.length} | ${fmt(pct(overhead, 50))} | ${fmt(pct(overhead, 99))} |`,
  );
  console.log(
    `| responseMs (pipeline: VAD's end of speech → first audible agent audio) | ${metrics.length} | ${fmt(
      pct(
        metrics.map((m) => m.responseMs),
        50,
      ),
    )} | ${fmt(
      pct(
        metrics.map((m) => m.responseMs),
        99,
      ),
    )} |`,
  );
  console.log(
    `| response as the callers heard it (end of their line → first agent audio) | ${heardResponse.length} | ${fmt(pct(heardResponse, 50))} | ${fmt(pct(heardResponse, 99))} |`,
  );
  console.log(
    `| the playground's event-loop delay over the run | — | ${loop.p50.toFixed(1)} | ${loop.p99.toFixed(1)} |`,
  );
  if (errors.length > 0) console.log(`\nerrors: ${errors.slice(0, 3).join(' | ')}`);
} finally {
  await cleanup();
}
process.exit(0);
