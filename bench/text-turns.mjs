#!/usr/bin/env node
// Text-turn throughput through the whole stack (gateway → NATS → playground → model stub, transcripts to the
// sessions service), and, with `--base <another built checkout>`, a same-run A/B of it: each round runs A then
// B (alternating which goes first) for `--seconds` with `--workers` concurrent text sessions of 8 turns each
// against an OpenAI-compatible stub that answers at once. Prints turns/s per round and the median B/A: what
// recording events and figures costs a turn when the base is the build before them.
// Usage: npm run build && node bench/text-turns.mjs [--base ../base] [--rounds 4] [--seconds 8] [--workers 8]
import { join, resolve } from 'node:path';
import { fullFlow, withNode } from '@vab/testkit';
import { option, sendJson, startCoreStack, startModelStub, startProcess } from './processes.mjs';
import { root as here } from './lib/figures.mjs';

const base = option('base');
const ROUNDS = option('rounds', 4);
const SECONDS = option('seconds', 8);
const WORKERS = option('workers', 8);
const TURNS = ['Hi', 'Ada', '1815', 'Well, hmm', 'Still thinking', 'Hmm', 'Not sure', 'Well'];

const stub = await startModelStub();

/** One side's stack: its own NATS and Redis, the four services from `root`, an agent on the stub. */
async function side(root) {
  const { nats, redis, env, ...core } = await startCoreStack(root, { MAX_SESSIONS: '1000' });
  const playground = await startProcess(
    join(root, 'services/playground/dist/main.js'),
    { ...env, LOG_LEVEL: 'info' },
    'playground instance up',
  );
  const flow = withNode(fullFlow(), 'llm', { baseURL: stub.url, model: 'stub' });
  const agent = await sendJson('POST', `${core.url}/api/agents`, { name: 'Turns bench', flow });
  return { url: core.url, agentId: agent.id, procs: [...core.procs, playground], nats, redis };
}

/** Turns answered in `seconds` by `WORKERS` sessions that each talk 8 turns, then end and start again. */
async function measure(s, seconds) {
  const until = performance.now() + seconds * 1000;
  let turns = 0;
  const worker = async () => {
    while (performance.now() < until) {
      const started = await sendJson('POST', `${s.url}/api/agents/${s.agentId}/text-sessions`, {
        apiKeys: { openai: 'sk-bench' },
      });
      const path = `${s.url}/api/agents/${s.agentId}/text-sessions/${started.sessionId}`;
      for (const text of TURNS) {
        if (performance.now() >= until) break;
        await sendJson('POST', `${path}/turns`, { text });
        turns++;
      }
      await sendJson('DELETE', path);
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  return turns / seconds;
}

const sides = base ? { A: await side(resolve(base)), B: await side(here) } : { B: await side(here) };
// a warm-up of each: the first sessions pay for module loading and connections
for (const s of Object.values(sides)) await measure(s, 2);
const ratios = [];
console.log(
  `# text turns, ${WORKERS} concurrent sessions, model stub answering at once, ${SECONDS} s per run`,
);
console.log(base ? '| round | A turns/s | B turns/s | B/A |' : '| round | turns/s |');
console.log(base ? '|---|---|---|---|' : '|---|---|');
for (let r = 1; r <= ROUNDS; r++) {
  if (!base) {
    console.log(`| ${r} | ${(await measure(sides.B, SECONDS)).toFixed(1)} |`);
    continue;
  }
  const order = r % 2 ? ['A', 'B'] : ['B', 'A'];
  const got = {};
  for (const k of order) got[k] = await measure(sides[k], SECONDS);
  ratios.push(got.B / got.A);
  console.log(`| ${r} | ${got.A.toFixed(1)} | ${got.B.toFixed(1)} | ${(got.B / got.A).toFixed(3)} |`);
}
if (base) {
  const sorted = [...ratios].sort((a, b) => a - b);
  console.log(`\nmedian B/A: ${sorted[Math.floor(sorted.length / 2)].toFixed(3)}`);
}
for (const s of Object.values(sides)) {
  for (const p of s.procs) p.kill('SIGTERM');
  await s.nats.dispose();
  await s.redis.dispose();
}
stub.server.close();
process.exit(0);
