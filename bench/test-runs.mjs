#!/usr/bin/env node
// Regression test runs at scale: `--cases` cases of `--turns` turns each, run through the gateway against an
// OpenAI-compatible stub that answers at once, with 1, 2 … `--instances` playground processes (sessions
// TEST_RUN_CONCURRENCY `--concurrency`). Prints the wall time of each run, and the time of one text turn
// through the gateway (the runtime's own cost per turn: the stub's answer takes well under a millisecond).
// `--model-ms 50 --max-sessions 4`: a model that takes 50 ms per call and instances that hold 4 sessions
// each, so the instances' capacity is the limit (how runs scale with instances).
// Usage: npm run build && node bench/test-runs.mjs [--cases 100] [--turns 5] [--instances 2] [--concurrency 8]
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fullFlow, withNode } from '@vab/testkit';
import { finishedRun, option, sendJson, startCoreStack, startModelStub, startProcess } from './processes.mjs';
import { root } from './lib/figures.mjs';

const CASES = option('cases', 100);
const TURNS = option('turns', 5);
const INSTANCES = option('instances', 2);
const CONCURRENCY = option('concurrency', 8);
/** How long the stub takes per model call (0: at once; a real model takes hundreds of ms). */
const MODEL_MS = option('model-ms', 0);
/** Sessions per playground instance (MAX_SESSIONS): with a slow model, the instances' capacity is the limit. */
const MAX_SESSIONS = option('max-sessions', 100);

const { url: stubURL, served, server: stub } = await startModelStub({ modelMs: MODEL_MS });

const core = await startCoreStack(root, {
  LOG_LEVEL: 'info',
  TEST_RUN_CONCURRENCY: String(CONCURRENCY),
  MAX_TEST_CASES_PER_AGENT: String(Math.max(200, CASES)),
  MAX_SESSIONS: String(MAX_SESSIONS),
});
const { url: base, procs, nats, redis, env } = core;
const apiKeys = { openai: 'sk-bench' };
const flow = withNode(fullFlow(), 'llm', { baseURL: stubURL, model: 'stub' });
const agent = await sendJson('POST', `${base}/api/agents`, { name: 'Bench clinic', flow });
const turns = [
  'Hi',
  'Ada',
  '1815',
  'I have a question',
  'When do you open?',
  'Thanks',
  'Anything else?',
].slice(0, TURNS);
for (let i = 0; i < CASES; i++) {
  await sendJson('POST', `${base}/api/agents/${agent.id}/test-cases`, {
    name: `case ${i}`,
    turns,
    expect: { steps: ['start', 'burst'] },
  });
}

const playgrounds = [];
// each model call's duration as the playground sees it (bench/llm-timing.mjs)
const timingFile = join(tmpdir(), `vab-llm-timing-${process.pid}`);
rmSync(timingFile, { force: true });
console.log(
  `# test runs: ${CASES} cases × ${turns.length} turns, TEST_RUN_CONCURRENCY=${CONCURRENCY}, ` +
    `MAX_SESSIONS=${MAX_SESSIONS}, model stub answering ${MODEL_MS ? `after ${MODEL_MS} ms` : 'at once'}`,
);
console.log('| playground instances | wall time | cases/s | passed | errored |');
console.log('|---|---|---|---|---|');
for (let n = 1; n <= INSTANCES; n++) {
  playgrounds.push(
    await startProcess(
      join(root, 'services/playground/dist/main.js'),
      { ...env, INSTANCE_ID: `bench-${n}`, LLM_TIMING_FILE: timingFile },
      'playground instance up',
      ['--import', join(root, 'bench/llm-timing.mjs')],
    ),
  );
  const t0 = performance.now();
  const run = await finishedRun(base, agent.id, { apiKeys }, 100);
  const seconds = (performance.now() - t0) / 1000;
  console.log(
    `| ${n} | ${seconds.toFixed(1)} s | ${(CASES / seconds).toFixed(1)} | ${run.counts.passed} | ${run.counts.errored} |`,
  );
}

// text turns through the gateway, the model answering at once: 60 conversations of the cases' turns (a
// conversation's context grows with every turn, and LiveKit converts all of it for each model call, so
// one endless conversation would measure its length, not a turn)
const turnsTimed = []; // [start epoch ms, end epoch ms, duration ms]
const before = { ...served };
for (let c = 0; c < 60; c++) {
  const session = await sendJson('POST', `${base}/api/agents/${agent.id}/text-sessions`, { apiKeys });
  for (const text of turns) {
    const start = Date.now();
    const t0 = performance.now();
    const r = await sendJson(
      'POST',
      `${base}/api/agents/${agent.id}/text-sessions/${session.sessionId}/turns`,
      {
        text,
      },
    );
    turnsTimed.push([start, Date.now(), performance.now() - t0]);
    if (r.ended) break;
  }
  await sendJson('DELETE', `${base}/api/agents/${agent.id}/text-sessions/${session.sessionId}`);
}
// each turn minus the model calls that ended within it
const calls = readFileSync(timingFile, 'utf8')
  .trim()
  .split('\n')
  .map((l) => l.split(' ').map(Number));
const beyond = turnsTimed.map(([start, end, ms]) => {
  const model = calls.filter(([at]) => at >= start && at <= end).reduce((sum, [, d]) => sum + d, 0);
  return ms - model;
});
// the gateway path alone, the same way: a read of the agent, one at a time
const reads = [];
for (let i = 0; i < 300; i++) {
  const t0 = performance.now();
  await sendJson('GET', `${base}/api/agents/${agent.id}`);
  reads.push(performance.now() - t0);
}
const p = (xs, q) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * q)].toFixed(1);
const times = turnsTimed.map(([, , ms]) => ms);
const perTurn = (served.calls - before.calls) / times.length;
console.log(
  `\ntext turns through the gateway (${times.length} in 60 conversations, ${perTurn.toFixed(2)} model calls each):`,
);
console.log(`| per turn | p50 | p90 | p99 |`);
console.log(`|---|---|---|---|`);
console.log(`| whole turn | ${p(times, 0.5)} ms | ${p(times, 0.9)} ms | ${p(times, 0.99)} ms |`);
console.log(
  `| beyond its model calls | ${p(beyond, 0.5)} ms | ${p(beyond, 0.9)} ms | ${p(beyond, 0.99)} ms |`,
);
console.log(
  `| the gateway path alone (GET /api/agents/:id) | ${p(reads, 0.5)} ms | ${p(reads, 0.9)} ms | ${p(reads, 0.99)} ms |`,
);
console.log(
  `the stub's own time per model call: ${((served.ms - before.ms) / Math.max(1, served.calls - before.calls)).toFixed(2)} ms`,
);

for (const p of [...playgrounds, ...procs]) p.kill('SIGTERM');
stub.close();
rmSync(timingFile, { force: true });
await redis.dispose();
await nats.dispose();
process.exit(0);
