#!/usr/bin/env node
// Simulated test cases at scale: `--cases` simulated cases × `--repeat` attempts, each a simulated caller
// that speaks `--turns` times and then hangs up, one criterion judged per attempt, through the gateway on ONE
// playground instance, against an OpenAI-compatible stub that answers at once (agent, caller and judge).
// Prints the run's wall time. Then the fixed cost of one attempt beyond its turns: `playground.cases.run`
// asked over the bus one at a time for attempts of 0 and of `--turns` turns (p50 each), the difference per
// turn, and the 0-turn attempt (session start, greeting, the caller hanging up, the judge, the session's
// close) as the fixed cost.
// Usage: npm run build && node bench/simulations.mjs [--cases 20] [--repeat 5] [--turns 8] [--concurrency 8]
//   [--cpu-prof <dir>]
import { join } from 'node:path';
import pino from 'pino';
import { BusClient, connectNats } from '@vab/bus';
import { Subjects } from '@vab/contracts';
import { orderFlow } from '@vab/testkit';
import { finishedRun, option, sendJson, startCoreStack, startModelStub, startProcess } from './processes.mjs';
import { root } from './lib/figures.mjs';

const CASES = option('cases', 20);
const REPEAT = option('repeat', 5);
const TURNS = option('turns', 8);
const CONCURRENCY = option('concurrency', 8);
/** `--cpu-prof <dir>`: a V8 CPU profile of the playground process, written there when it exits. */
const CPU_PROF = option('cpu-prof', '');

const text = (c) => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => p.text ?? '').join('') : '');

/** Agent: "ok"; caller: speaks until it has said as many lines as its persona says, then hangs up; judge: pass. */
function reply(chat) {
  const tools = (chat.tools ?? []).map((t) => t.function.name);
  if (tools.includes('end_call')) {
    const system = text(chat.messages[0]?.content);
    const wanted = Number(/speaks (\d+) times/.exec(system)?.[1] ?? 0);
    const said = chat.messages.filter((m) => m.role === 'assistant').length;
    return said >= wanted
      ? { tool: { name: 'end_call', args: { outcome: 'goal_reached' } } }
      : { content: `line ${said + 1}` };
  }
  if (tools.includes('verdict')) {
    return { tool: { name: 'verdict', args: { passed: true, reason: 'fine', turn: 1 } } };
  }
  return { content: 'ok' };
}

const { url: stubURL, served, server: stub } = await startModelStub({ reply });

const flow = orderFlow({ modelURL: stubURL });

const core = await startCoreStack(root, {
  TEST_RUN_CONCURRENCY: String(CONCURRENCY),
  MAX_TEST_CASES_PER_AGENT: String(Math.max(200, CASES)),
});
const { url: base, procs, nats, redis, env } = core;
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  { ...env, LOG_LEVEL: 'info', INSTANCE_ID: 'bench-1' },
  'playground instance up',
  CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', CPU_PROF] : [],
);
const apiKeys = { openai: 'sk-bench' };
const agent = await sendJson('POST', `${base}/api/agents`, { name: 'Bench orders', flow });
const simulation = (turns) => ({
  persona: `A caller who speaks ${turns} times.`,
  goal: 'Learn when the order ships.',
  maxTurns: Math.max(1, turns),
});
const criteria = [{ name: 'polite', description: 'The agent stays polite.' }];
for (let i = 0; i < CASES; i++) {
  await sendJson('POST', `${base}/api/agents/${agent.id}/test-cases`, {
    name: `case ${i}`,
    simulation: simulation(TURNS),
    criteria,
    repeat: REPEAT,
    minPassRate: 0.8,
  });
}

console.log(
  `# simulated test runs: ${CASES} cases × repeat ${REPEAT} × ${TURNS} caller turns, one criterion, ` +
    `1 playground instance, TEST_RUN_CONCURRENCY=${CONCURRENCY}, model stub answering at once`,
);
const calls0 = served.calls;
const t0 = performance.now();
const run = await finishedRun(base, agent.id, { apiKeys }, 50);
const seconds = (performance.now() - t0) / 1000;
const attempts = run.cases.reduce((n, c) => n + c.repeats.length, 0);
const turns = run.cases.reduce(
  (n, c) => n + c.repeats.reduce((m, a) => m + (a.observed?.userTurns.length ?? 0), 0),
  0,
);
console.log('| attempts | caller turns | model calls | wall time | attempts/s | run status | cases passed |');
console.log('|---|---|---|---|---|---|---|');
console.log(
  `| ${attempts} | ${turns} | ${served.calls - calls0} | ${seconds.toFixed(1)} s | ${(attempts / seconds).toFixed(1)} | ` +
    `${run.status} | ${run.counts.passed}/${run.counts.total} |`,
);

// one attempt at a time over the bus: its whole time, at 0 turns and at TURNS turns
const nc = await connectNats({ url: nats.url, name: 'bench', service: 'bench' }, pino({ level: 'warn' }));
const bus = new BusClient(nc);
const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
async function attemptTimes(n, turnsEach) {
  const times = [];
  for (let i = 0; i < n + 5; i++) {
    const t = performance.now();
    const seen = await bus.request(
      Subjects.testCaseRun,
      {
        agentId: agent.id,
        version: 1,
        runId: 'bench',
        caseId: 'bench',
        turns: [],
        temperature: null,
        apiKeys,
        simulation: simulation(turnsEach),
        criteria,
      },
      { timeoutMs: 30_000, requestId: `bench-${turnsEach}-${i}` },
    );
    if (seen.userTurns.length !== turnsEach || seen.error)
      throw new Error(`unexpected attempt: ${JSON.stringify(seen)}`);
    if (i >= 5) times.push(performance.now() - t); // the first few warm up
  }
  return times;
}
const zero = await attemptTimes(40, 0);
const full = await attemptTimes(40, TURNS);
const perTurn = (p50(full) - p50(zero)) / TURNS;
console.log(`\none attempt at a time (playground.cases.run over the bus, 40 each, p50):`);
console.log('| attempt | p50 |');
console.log('|---|---|');
console.log(
  `| 0 caller turns (the fixed cost: start, greeting, hang-up, judge, close) | ${p50(zero).toFixed(1)} ms |`,
);
console.log(`| ${TURNS} caller turns | ${p50(full).toFixed(1)} ms |`);
console.log(`| per caller turn (the difference / ${TURNS}) | ${perTurn.toFixed(1)} ms |`);

await nc.close();
// the playground first, and waited for: a CPU profile is written as it exits
const exited = new Promise((r) => playground.once('exit', r));
playground.kill('SIGTERM');
await exited;
for (const p of procs) p.kill('SIGTERM');
stub.close();
await redis.dispose();
await nats.dispose();
process.exit(0);
