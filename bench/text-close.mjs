#!/usr/bin/env node
// What closing a text session costs, and what a regression case costs beyond its turns, against an
// OpenAI-compatible stub that answers at once (docs/performance.md, "Closing a text session").
// - close: `DELETE …/text-sessions/:id` through the gateway after a greeting and one turn, `--sessions` times.
// - a case's fixed cost: one case of `--turns` turns sent to the playground over the bus (what the sessions
//   service's test run sends), paired with the same conversation as a text session over the bus (its start and
//   its turns, not its end); the difference is what a case adds to its turns (loading the version, recording
//   the test session, ending it).
// Usage: npm run build && node bench/text-close.mjs [--sessions 30] [--cases 20] [--turns 3]
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { BusClient, connectNats } from '@vab/bus';
import { Subjects } from '@vab/contracts';
import { fullFlow, startLocalNats, startLocalRedis, withNode } from '@vab/testkit';
import pino from 'pino';
import { option, sendJson, startCore, startModelStub, startProcess } from './processes.mjs';
import { root } from './lib/figures.mjs';

const SESSIONS = option('sessions', 30);
const CASES = option('cases', 20);
const TURNS = option('turns', 3);
const WARMUP = 5;

const stub = await startModelStub();
const nats = await startLocalNats();
const redis = await startLocalRedis();
const env = { NATS_URL: nats.url, REDIS_URL: redis.url, FLOW_EGRESS_ALLOW: '127.0.0.1' };
const { url: base, procs } = await startCore(root, env, { SESSION_RATE_LIMIT_MAX: '1000000000' });
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  { ...env, INSTANCE_ID: 'bench-1' },
  'playground instance up',
);
const nc = await connectNats({ url: nats.url, name: 'bench', service: 'bench' }, pino({ level: 'warn' }));
const bus = new BusClient(nc);

const apiKeys = { openai: 'sk-bench' };
const flow = withNode(fullFlow(), 'llm', { baseURL: stub.url, model: 'stub' });
const agent = await sendJson('POST', `${base}/api/agents`, { name: 'Bench clinic', flow });
const said = ['Hi', 'Ada', '1815', 'I have a question', 'When do you open?'].slice(0, TURNS);

const p = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))];
const ms = (x) => `${x.toFixed(1)} ms`;

// ---- close through the gateway --------------------------------------------------------------------------
const closes = [];
for (let i = 0; i < WARMUP + SESSIONS; i++) {
  const session = await sendJson('POST', `${base}/api/agents/${agent.id}/text-sessions`, { apiKeys });
  const sessionUrl = `${base}/api/agents/${agent.id}/text-sessions/${session.sessionId}`;
  await sendJson('POST', `${sessionUrl}/turns`, { text: 'Hi' });
  const t0 = performance.now();
  await sendJson('DELETE', sessionUrl);
  if (i >= WARMUP) closes.push(performance.now() - t0);
}

// ---- a case against the same conversation as a text session, over the bus ------------------------------
const opts = () => ({ timeoutMs: 60_000, requestId: randomUUID() });
const cases = [];
const conversations = [];
for (let i = 0; i < WARMUP + CASES; i++) {
  let t0 = performance.now();
  await bus.request(
    Subjects.testCaseRun,
    {
      agentId: agent.id,
      version: agent.version,
      runId: `bench-run`,
      caseId: `case-${i}`,
      turns: said,
      temperature: null,
      apiKeys,
    },
    opts(),
  );
  const caseMs = performance.now() - t0;
  t0 = performance.now();
  const started = await bus.request(
    Subjects.textSessionStart,
    { agentId: agent.id, body: { apiKeys } },
    opts(),
  );
  let last = started;
  for (const text of said) {
    if (last.ended) break;
    last = await bus.request(
      Subjects.textSessionTurn,
      { agentId: agent.id, sessionId: started.sessionId, text },
      opts(),
    );
  }
  const turnsMs = performance.now() - t0;
  await bus.request(Subjects.textSessionEnd, { agentId: agent.id, sessionId: started.sessionId }, opts());
  if (i >= WARMUP) {
    cases.push(caseMs);
    conversations.push(turnsMs);
  }
}
const fixed = cases.map((c, i) => c - conversations[i]);

console.log(`# text session close and a case's fixed cost (model stub answering at once)`);
console.log('| measure | p50 | p90 | max |');
console.log('|---|---|---|---|');
console.log(
  `| close (DELETE, ${SESSIONS} sessions) | ${ms(p(closes, 0.5))} | ${ms(p(closes, 0.9))} | ${ms(Math.max(...closes))} |`,
);
console.log(
  `| case, ${TURNS} turns (${CASES} cases) | ${ms(p(cases, 0.5))} | ${ms(p(cases, 0.9))} | ${ms(Math.max(...cases))} |`,
);
console.log(
  `| same turns as a text session | ${ms(p(conversations, 0.5))} | ${ms(p(conversations, 0.9))} | ${ms(Math.max(...conversations))} |`,
);
console.log(
  `| case beyond its turns (paired) | ${ms(p(fixed, 0.5))} | ${ms(p(fixed, 0.9))} | ${ms(Math.max(...fixed))} |`,
);

await nc.close();
for (const proc of [playground, ...procs]) proc.kill('SIGTERM');
stub.server.close();
await redis.dispose();
await nats.dispose();
process.exit(0);
