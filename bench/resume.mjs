#!/usr/bin/env node
// A voice call through its gateway's death (issue 50, docs/performance.md › Resume after a gateway's death):
// --kills times, a voice session is started over one gateway, its greeting played, then that gateway is
// SIGKILLed; the client reopens the socket on the other gateway with its resume token (`?resume=`, as
// voice-call.js does) and the gap is measured: from the drop the client saw (its socket closed 1006) and from
// the kill itself to the new `ready` (the caller's audio flows again). A session that does not resume (any
// other close, no `ready`) is lost. The killed gateway is started again for the next round, so the two
// alternate. Instant chat and speech stubs (bench/voice-stubs.mjs); agents, sessions, two gateways and one
// playground from their builds on a NATS and a Redis of their own.
// Usage: npm run build && node bench/resume.mjs [--kills 20]
import { join } from 'node:path';
import { freePort, VoiceClient, voiceFlow } from '@vab/testkit';
import { option, sendJson, startCoreStack, startProcess, startVoiceStubs } from './processes.mjs';
import { fmt, pct, root, sleep } from './lib/figures.mjs';

const KILLS = option('kills', 20);

const core = await startCoreStack(root, { MAX_SESSIONS_PER_CALLER: '0' });
const stubs = await startVoiceStubs(root);
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  {
    ...core.env,
    LOG_LEVEL: 'info',
    RECORDINGS: 'off',
    MAX_SESSIONS_PER_CALLER: '0',
    LOAD_MAX_EVENT_LOOP_P99_MS: '0',
    LOAD_MAX_BEHIND_MS: '0',
    LOAD_MAX_CPU_PERCENT: '0',
  },
  'playground instance up',
);

async function startGateway() {
  const port = await freePort();
  const proc = await startProcess(
    join(root, 'services/gateway/dist/main.js'),
    {
      ...core.env,
      LOG_LEVEL: 'info',
      PORT: String(port),
      RATE_LIMIT_MAX: '1000000000',
      SESSION_RATE_LIMIT_MAX: '1000000000',
    },
    'gateway listening',
  );
  return { proc, url: `http://127.0.0.1:${port}` };
}

const gateways = [{ proc: core.gateway, url: core.url }, await startGateway()];
const cleanup = async () => {
  for (const g of gateways) g.proc.kill('SIGKILL');
  playground.kill();
  core.agents.kill();
  core.sessions.kill();
  stubs.close();
  await core.nats.stop();
  await core.redis.stop();
};

const ws = (url) => url.replace(/^http/, 'ws');

try {
  const agent = await sendJson('POST', `${core.url}/api/agents`, {
    name: 'bench resume',
    flow: voiceFlow({ chatURL: stubs.chatURL, speechURL: stubs.speechURL }),
  });
  const fromDrop = [];
  const fromKill = [];
  let lost = 0;
  for (let k = 0; k < KILLS; k++) {
    const [doomed, other] = k % 2 === 0 ? gateways : [gateways[1], gateways[0]];
    const started = await sendJson('POST', `${doomed.url}/api/agents/${agent.id}/voice-sessions`, {
      apiKeys: { openai: 'sk-bench-resume-0123456789' },
    });
    const client = new VoiceClient({ url: ws(doomed.url) + started.audioPath });
    await client.ready;
    while (client.segments.length === 0) await sleep(20);
    const token = client.readyMessage.resumeToken;
    const killedAt = performance.now();
    doomed.proc.kill('SIGKILL');
    const closed = await client.closed;
    const droppedAt = performance.now();
    const resumed = new VoiceClient({
      url: `${ws(other.url)}${started.audioPath}?resume=${encodeURIComponent(token)}`,
    });
    try {
      if (closed.code !== 1006) throw new Error(`closed ${closed.code}`);
      await resumed.ready;
      const at = performance.now();
      fromDrop.push(at - droppedAt);
      fromKill.push(at - killedAt);
    } catch (err) {
      lost++;
      console.error(`kill ${k + 1}: not resumed (${err.message})`);
    }
    resumed.send({ type: 'end' });
    await resumed.closed.catch(() => undefined);
    // the killed gateway comes back for the next round
    const back = await startGateway();
    gateways[gateways.indexOf(doomed)] = back;
  }
  console.log(`\n### resume after a gateway's death: ${KILLS} kills (SIGKILL), instant stubs\n`);
  console.log('| from | p50 ms | p90 ms | max ms |');
  console.log('| ---- | -----: | -----: | -----: |');
  for (const [name, xs] of [
    ['the drop (socket closed 1006) → `ready` on the other gateway', fromDrop],
    ['the kill → `ready` on the other gateway', fromKill],
  ])
    console.log(`| ${name} | ${fmt(pct(xs, 50))} | ${fmt(pct(xs, 90))} | ${fmt(Math.max(...xs))} |`);
  console.log(`\nsessions resumed ${KILLS - lost} of ${KILLS}; lost ${lost}`);
} finally {
  await cleanup();
}
