#!/usr/bin/env node
// Admission by load under a CPU hog (issue 50; docs/performance.md › Admission): two playground instances, each a
// process of its own pinned to one core (taskset), and a CPU hog (a busy loop) pinned to the first instance's
// core. --sessions voice sessions (Festival's speech in real time, --turns turns each, bench/voice-callers.mjs)
// are started through the gateway; a start no instance admits (503) is retried after its Retry-After. Printed:
// how many sessions each instance admitted, how many starts were refused; each instance's event-loop delay p99
// and how far its worst session's VAD fell behind real time while they talked (its own load samples, logged at
// debug each LOAD_CHECK_INTERVAL_MS), and the turns' figures. Admission at its defaults (docs/operations.md).
// Usage: npm run build && node bench/admission.mjs [--sessions 50] [--turns 3] [--hog on|off]
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { voiceFlow } from '@vab/testkit';
import { pct } from './lib/figures.mjs';
import { option, runVoiceCallers, sendJson, startCoreStack, startVoiceStubs } from './processes.mjs';

const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const SESSIONS = option('sessions', 50);
const TURNS = option('turns', 3);
const HOG = option('hog', 'on');

const fmt = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '—');

const stack = await startCoreStack(here);
const stubs = await startVoiceStubs(here);
const children = [];
const stop = () => {
  for (const c of children) c.kill('SIGKILL');
  for (const p of stack.procs) p.kill();
  stubs.close();
};

/** A playground instance pinned to `core`; its load samples and started sessions, read from its log. */
function instance(core) {
  const child = spawn(
    'taskset',
    ['-c', String(core), process.execPath, join(here, 'services/playground/dist/main.js')],
    {
      env: {
        ...process.env,
        ...stack.env,
        LOG_LEVEL: 'debug',
        MAX_SESSIONS: String(SESSIONS + 5),
        MAX_SESSIONS_PER_CALLER: '0',
        VOICE_INPUT_IDLE_MS: '30000',
        ENV_FILE: '/nonexistent/.env',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  children.push(child);
  const me = {
    core,
    samples: [],
    started: new Set(),
    overloaded: 0,
    recovered: 0,
    talking: false,
    ready: undefined,
  };
  me.ready = new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`playground on core ${core} exited ${code}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line.includes('"msg":"serving"')) resolve();
      else if (line.includes('"msg":"load sample"')) {
        if (me.talking) me.samples.push(JSON.parse(line));
      } else if (line.includes('"msg":"session started"')) me.started.add(JSON.parse(line).sessionId);
      else if (line.includes('"INSTANCE_OVERLOADED"')) me.overloaded++;
      else if (line.includes('"msg":"load recovered')) me.recovered++;
    });
  });
  return me;
}

try {
  const loaded = instance(0);
  const quiet = instance(1);
  await Promise.all([loaded.ready, quiet.ready]);
  if (HOG === 'on') {
    const hog = spawn('taskset', ['-c', '0', process.execPath, '-e', 'for (;;) {}'], { stdio: 'ignore' });
    children.push(hog);
  }
  const agent = await sendJson('POST', `${stack.url}/api/agents`, {
    name: 'bench admission',
    flow: voiceFlow({
      chatURL: stubs.chatURL,
      speechURL: stubs.speechURL,
      agent: { minEndpointingDelay: 500, preemptiveGeneration: false },
    }),
  });
  // the instances measure the hog for a few intervals first (LOAD_OVER_FOR_MS)
  await new Promise((r) => setTimeout(r, 5000));
  for (const i of [loaded, quiet]) i.talking = true;
  const result = await runVoiceCallers(here, {
    url: stack.url,
    agentId: agent.id,
    sessions: SESSIONS,
    turns: TURNS,
    retry: 'on',
  });
  for (const i of [loaded, quiet]) i.talking = false;
  const { figures, talkSeconds, refused, givenUp, sessionIds, notReady, endedEarly } = result;
  console.log(
    `\n### ${SESSIONS} voice sessions against 2 playground instances (one core each), a CPU hog on core 0: ${HOG}, ${TURNS} turns each (${fmt(talkSeconds)} s)\n`,
  );
  console.log(
    '| instance | sessions admitted | overloaded (times) | event-loop p99 ms, intervals p50 / max | VAD behind real time ms, worst session, p50 / max |',
  );
  console.log('| --- | --- | --- | --- | --- |');
  for (const [name, i] of [
    ['core 0 (with the hog)', loaded],
    ['core 1', quiet],
  ]) {
    const admitted = sessionIds.filter((id) => i.started.has(id)).length;
    const loop = i.samples.map((s) => s.eventLoopP99Ms);
    const behind = i.samples.map((s) => s.behindMs);
    console.log(
      `| ${name} | ${admitted} | ${i.overloaded} | ${fmt(pct(loop, 50))} / ${fmt(Math.max(...loop))} | ${fmt(pct(behind, 50))} / ${fmt(Math.max(...behind))} |`,
    );
  }
  const response = figures.map((m) => m.responseMs);
  const overhead = figures
    .filter((m) => m.endOfTurnDelayMs !== undefined)
    .map((m) => m.responseMs - m.endOfTurnDelayMs - (m.ttsTtfbMs ?? 0) - (m.llmTtftMs ?? 0));
  console.log(
    `\nstarts refused (503, retried after Retry-After): ${refused}; given up after 5 retries: ${givenUp}; sessions talking: ${sessionIds.length} of ${SESSIONS}; closed before ready: ${notReady.length}${notReady.length ? ` (${[...new Set(notReady)].join('; ')})` : ''}`,
  );
  const reasons = new Map();
  for (const r of endedEarly) reasons.set(r, (reasons.get(r) ?? 0) + 1);
  console.log(
    `sessions ended by their instance while talking: ${endedEarly.length}${endedEarly.length ? ` (${[...reasons].map(([r, n]) => `${n}× ${r}`).join('; ')})` : ''}`,
  );
  console.log(
    `turns measured: ${figures.length} of ${sessionIds.length * TURNS}; responseMs p50 ${fmt(pct(response, 50))} / p99 ${fmt(pct(response, 99))} ms; turn overhead p50 ${fmt(pct(overhead, 50))} / p99 ${fmt(pct(overhead, 99))} ms`,
  );
} finally {
  stop();
  await stack.nats.stop();
  await stack.redis.stop();
}
process.exit(0);
