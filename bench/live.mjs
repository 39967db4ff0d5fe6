#!/usr/bin/env node
// Public calls of a live deploy (issue 45's numbers, docs/performance.md › Live calls), against instant chat and
// speech stubs (bench/voice-stubs.mjs, a process of their own), with the gateway, agents, sessions and
// --instances playground processes from their builds on a NATS and a Redis of their own:
// 1. start: --calls calls one after another: POST /live/:subdomain/calls (no token, as the page calls it) →
//    `ready` on its audio socket, p50/p99, split into the POST and the socket's connect → ready; then the
//    greeting's first audio after `ready` (the models' own start, instant here).
// 2. burst: --burst calls started evenly over --over seconds, each streaming silence in real time for --hold
//    seconds, against a deploy whose maxConcurrentCalls is --cap: how many were admitted, refused with a
//    documented answer (429/503 with Retry-After) and lost (anything else: an error, a socket that never got
//    `ready`), the most admitted at once, and each instance's event-loop delay p99 over the burst (its /metrics:
//    prom-client resets the figure at each scrape).
// Usage: npm run build && node bench/live.mjs [--calls 50] [--burst 200] [--over 10] [--hold 5] [--cap 150] [--instances 4]
import { join } from 'node:path';
import { freePort, VoiceClient, voiceFlow } from '@vab/testkit';
import { deployLive, option, sendJson, startCoreStack, startProcess, startVoiceStubs } from './processes.mjs';
import { fmt, pct, root, sleep } from './lib/figures.mjs';

const CALLS = option('calls', 50);
const BURST = option('burst', 200);
const OVER_S = option('over', 10);
const HOLD_S = option('hold', 5);
const CAP = option('cap', 150);
const INSTANCES = option('instances', 4);

const core = await startCoreStack(root, {
  // one address is every caller here
  LIVE_MAX_CALLS_PER_ADDRESS: String(BURST + 10),
});
const stubs = await startVoiceStubs(root);
const instances = [];
for (let i = 0; i < INSTANCES; i++) {
  const metricsPort = await freePort();
  const proc = await startProcess(
    join(root, 'services/playground/dist/main.js'),
    {
      ...core.env,
      // its ready line is an info line
      LOG_LEVEL: 'info',
      INSTANCE_ID: `bench-live-${i + 1}`,
      METRICS_PORT: String(metricsPort),
      METRICS_HOST: '127.0.0.1',
      MAX_SESSIONS: String(Math.ceil(BURST / INSTANCES) + 10),
      MAX_SESSIONS_PER_CALLER: String(BURST + 10),
      RECORDINGS: 'off',
    },
    'playground instance up',
  );
  instances.push({ proc, metrics: `http://127.0.0.1:${metricsPort}/metrics` });
}
const cleanup = async () => {
  for (const { proc } of instances) proc.kill();
  for (const p of core.procs) p.kill();
  stubs.close();
  await core.nats.stop();
  await core.redis.stop();
};

async function loopP99(url) {
  const text = await (await fetch(url)).text();
  const m = /^nodejs_eventloop_lag_p99_seconds(?:\{[^}]*\})? ([0-9.e+-]+)$/m.exec(text);
  return m ? Number(m[1]) * 1000 : NaN;
}

/** Starts one public call; resolves to its timings, or to how it was refused or lost. */
async function call(subdomain, holdMs) {
  const t0 = performance.now();
  let res;
  try {
    res = await fetch(`${core.url}/live/${subdomain}/calls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ audio: { sampleRate: 16000, frameMs: 20 } }),
    });
  } catch (err) {
    return { outcome: 'lost', why: `POST failed: ${err.message}` };
  }
  const body = await res.json().catch(() => ({}));
  const posted = performance.now();
  if (res.status === 429 || res.status === 503) {
    const documented = res.headers.get('retry-after') !== null && typeof body.code === 'string';
    // a deploy's caps say so (`capacity: 'deploy'`); an instance full or overloaded does not
    const who = body.capacity === 'deploy' ? ' deploy' : '';
    return { outcome: documented ? 'refused' : 'lost', why: `${res.status} ${body.code}${who}` };
  }
  if (res.status !== 201) return { outcome: 'lost', why: `${res.status} ${body.code ?? ''}` };
  const client = new VoiceClient({ url: core.url.replace(/^http/, 'ws') + body.audioPath });
  try {
    await client.ready;
  } catch (err) {
    return { outcome: 'lost', why: err.message };
  }
  const ready = performance.now();
  const greeted = await (async () => {
    const until = Date.now() + 10_000;
    while (client.segments.length === 0 && Date.now() < until) await sleep(5);
    return client.segments.length > 0 ? performance.now() : NaN;
  })();
  if (holdMs > 0) await sleep(Math.max(0, holdMs - (performance.now() - t0)));
  client.close();
  await client.closed;
  return {
    outcome: 'admitted',
    postMs: posted - t0,
    readyMs: ready - posted,
    startMs: ready - t0,
    greetMs: greeted - ready,
  };
}

try {
  const agent = await sendJson('POST', `${core.url}/api/agents`, {
    name: 'bench live',
    flow: voiceFlow({ chatURL: stubs.chatURL, speechURL: stubs.speechURL }),
  });
  const deploy = await sendJson('POST', `${core.url}/api/agents/${agent.id}/deploys`, {
    maxConcurrentCalls: CAP,
  });
  await deployLive(core.url, agent.id);
  console.log(`\n### public calls: ${INSTANCES} playground instances, instant stubs, recordings off\n`);

  const one = [];
  for (let i = 0; i < CALLS; i++) {
    const r = await call(deploy.subdomain, 0);
    if (r.outcome !== 'admitted') throw new Error(`call ${i}: ${r.outcome} (${r.why})`);
    one.push(r);
  }
  console.log(`| one call at a time (${CALLS}) | p50 ms | p99 ms |`);
  console.log('| --- | --- | --- |');
  for (const [name, key] of [
    ['POST /live/:subdomain/calls → 201', 'postMs'],
    ['socket connect → `ready`', 'readyMs'],
    ['POST → `ready` (the start of a call)', 'startMs'],
    ['`ready` → the greeting’s first audio', 'greetMs'],
  ]) {
    const xs = one.map((r) => r[key]);
    console.log(`| ${name} | ${fmt(pct(xs, 50))} | ${fmt(pct(xs, 99))} |`);
  }

  if (BURST > 0) {
    // calls of the first part ended: wait until the deploy holds none before the burst counts against its cap
    await sleep(2000);
    for (const i of instances) await loopP99(i.metrics);
    let open = 0;
    let most = 0;
    const results = [];
    const started = performance.now();
    for (let i = 0; i < BURST; i++) {
      const due = started + (i * OVER_S * 1000) / BURST;
      await sleep(Math.max(0, due - performance.now()));
      results.push(
        call(deploy.subdomain, HOLD_S * 1000).then((r) => {
          if (r.outcome === 'admitted') open--;
          return r;
        }),
      );
      // counted when the POST answers 201 would be later; this counts calls in flight, an upper bound
      open++;
      most = Math.max(most, open);
    }
    const all = await Promise.all(results);
    const p99s = await Promise.all(instances.map((i) => loopP99(i.metrics)));
    const by = (o) => all.filter((r) => r.outcome === o);
    console.log(
      `\n| ${BURST} calls over ${OVER_S} s, each held ${HOLD_S} s, maxConcurrentCalls ${CAP} | value |`,
    );
    console.log('| --- | --- |');
    console.log(`| admitted (socket \`ready\`) | ${by('admitted').length} |`);
    const refusals = {};
    for (const r of by('refused')) refusals[r.why] = (refusals[r.why] ?? 0) + 1;
    console.log(
      `| refused with 429/503 and Retry-After | ${by('refused').length} (${Object.entries(refusals)
        .map(([why, n]) => `${why}: ${n}`)
        .join(', ')}) |`,
    );
    console.log(`| lost (anything else) | ${by('lost').length} |`);
    const lost = by('lost').map((r) => r.why);
    if (lost.length) console.log(`| why lost (first 3) | ${lost.slice(0, 3).join('; ')} |`);
    const starts = by('admitted').map((r) => r.startMs);
    console.log(
      `| start (POST → ready) p50 / p99 ms under the burst | ${fmt(pct(starts, 50))} / ${fmt(pct(starts, 99))} |`,
    );
    console.log(`| event-loop delay p99 per instance, ms | ${p99s.map(fmt).join(' / ')} |`);
  }
} finally {
  await cleanup();
}
process.exit(0);
