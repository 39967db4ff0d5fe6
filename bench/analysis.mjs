#!/usr/bin/env node
// Post-call analysis (issue 47's numbers, docs/performance.md › Post-call analysis): --calls calls of a live
// deploy end evenly over --over seconds (held over the bus as a playground holds one: admitted, four transcript
// messages, ended), on an agent whose analysis has a summary, --criteria criteria and two data fields, with
// one playground instance working the queue CALL_ANALYSIS against a stub model answering each call after
// --model-ms. Prints the end's own time (the request that closes the call: the analysis is not on it),
// each call's end → `call.analyzed` p50/p99, and when the queue was drained after the last end.
// Usage: npm run build && node bench/analysis.mjs [--calls 100] [--over 60] [--model-ms 200] [--criteria 2]
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { busClientOf } from '@vab/bus';
import { voiceFlow } from '@vab/testkit';
import { deployLive, option, sendJson, startCoreStack, startModelStub, startProcess } from './processes.mjs';
import { fmt, pct, root, sleep } from './lib/figures.mjs';

const CALLS = option('calls', 100);
const OVER_S = option('over', 60);
const MODEL_MS = option('model-ms', 200);
const CRITERIA = option('criteria', 2);

const core = await startCoreStack(root, {});
const model = await startModelStub({
  modelMs: MODEL_MS,
  reply: (req) => {
    const offered = (name) => req.tools?.some((t) => t.function.name === name);
    if (offered('summary')) return { tool: { name: 'summary', args: { summary: 'The caller booked.' } } };
    if (offered('call_verdict'))
      return { tool: { name: 'call_verdict', args: { verdict: 'passed', reason: 'turn 2 says so' } } };
    if (offered('extract')) return { tool: { name: 'extract', args: { name: 'Ada', urgent: true } } };
    return { content: 'ok' };
  },
});
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  { ...core.env, LOG_LEVEL: 'info', INSTANCE_ID: 'bench-analysis', RECORDINGS: 'off' },
  'playground instance up',
);
const nc = await connect({ servers: core.env.NATS_URL });
const cleanup = async () => {
  await nc.close();
  playground.kill();
  for (const p of core.procs) p.kill();
  model.server.close();
  await core.nats.stop();
  await core.redis.stop();
};

const bus = busClientOf(nc);
/** One bus request as the playground makes it. */
const request = (subject, body) => bus.request(subject, body, { timeoutMs: 10_000, requestId: 'bench' });

try {
  const agent = await sendJson('POST', `${core.url}/api/agents`, {
    name: 'bench analysis',
    flow: voiceFlow({ chatURL: model.url, speechURL: model.url }),
  });
  await sendJson('PUT', `${core.url}/api/agents/${agent.id}/analysis`, {
    enabled: true,
    summary: true,
    criteria: Array.from({ length: CRITERIA }, (_, i) => ({ name: `c${i}`, description: `criterion ${i}` })),
    dataFields: [
      { name: 'name', type: 'string' },
      { name: 'urgent', type: 'boolean' },
    ],
    model: null,
  });
  const deploy = await sendJson('POST', `${core.url}/api/agents/${agent.id}/deploys`, {
    maxConcurrentCalls: CALLS + 10,
  });
  await deployLive(core.url, agent.id);

  const endedAt = new Map();
  const analysedAt = new Map();
  const sub = nc.subscribe(`domain.${agent.id}.call.analyzed`, {
    callback: (_e, m) => {
      const id = m.json().data.callId;
      if (!analysedAt.has(id)) analysedAt.set(id, performance.now());
    },
  });
  const endMs = [];
  const lines = [
    { role: 'assistant', content: 'Hello, how can I help?' },
    { role: 'user', content: 'I would like to book an appointment for tomorrow.' },
    { role: 'assistant', content: 'Tomorrow at nine works. Your name?' },
    { role: 'user', content: 'Ada. It is urgent.' },
  ];
  const oneCall = async () => {
    const a = await request('sessions.calls.admit', {
      subdomain: deploy.subdomain,
      channel: 'web',
      caller: {},
      instanceId: 'bench',
    });
    for (const [i, l] of lines.entries())
      await request('sessions.calls.append', {
        agentId: a.agentId,
        callId: a.callId,
        message: { ...l, stepId: 'start', timestamp: Date.now() + i },
      });
    const t = performance.now();
    await request('sessions.calls.end', {
      agentId: a.agentId,
      callId: a.callId,
      endedAt: Date.now(),
      endedReason: 'caller_hung_up',
    });
    endMs.push(performance.now() - t);
    endedAt.set(a.callId, performance.now());
  };
  console.log(
    `\n### post-call analysis: ${CALLS} calls ending over ${OVER_S} s, one playground instance, ` +
      `a ${MODEL_MS} ms model, summary + ${CRITERIA} criteria + 2 fields (${2 + CRITERIA} model calls a call)\n`,
  );
  const start = performance.now();
  const pending = [];
  for (let i = 0; i < CALLS; i++) {
    await sleep(Math.max(0, start + (i * OVER_S * 1000) / CALLS - performance.now()));
    pending.push(oneCall());
  }
  await Promise.all(pending);
  const lastEnd = Math.max(...endedAt.values());
  const until = Date.now() + 300_000;
  while (analysedAt.size < CALLS && Date.now() < until) await sleep(50);
  sub.unsubscribe();
  const waits = [...endedAt].filter(([id]) => analysedAt.has(id)).map(([id, t]) => analysedAt.get(id) - t);
  const drained = Math.max(...analysedAt.values()) - lastEnd;
  console.log(`| figure | value |`);
  console.log(`| --- | --- |`);
  console.log(`| calls analysed | ${analysedAt.size} / ${CALLS} |`);
  console.log(
    `| the end's request (closes the call) p50 / p99 | ${fmt(pct(endMs, 50))} / ${fmt(pct(endMs, 99))} ms |`,
  );
  console.log(`| end → call.analyzed p50 / p99 | ${fmt(pct(waits, 50))} / ${fmt(pct(waits, 99))} ms |`);
  console.log(`| queue drained after the last end | ${fmt(drained)} ms |`);
  console.log(`| model calls served | ${model.served?.calls ?? '—'} |`);
} finally {
  await cleanup();
}
