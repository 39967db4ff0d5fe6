#!/usr/bin/env node
// The callers of bench/voice.mjs, in a process of their own (so the playground's process measures only the
// playground): starts --sessions voice sessions of --agent at --url, streams speech (Festival's HTS voice, whose
// sentence end LiveKit's end-of-turn model hears: with espeak-ng's every turn waited maxEndpointingDelay) into each in
// real time --turns times (--stagger on|off), and prints one JSON line: every turn's figures, how long they talked, the sessions'
// ids and this process's own CPU time (a parent that counts its children's CPU takes it out).
import { concat, silence, speak, VoiceClient } from '@vab/testkit';
import { option } from './processes.mjs';

const url = process.argv[process.argv.indexOf('--url') + 1];
const agent = process.argv[process.argv.indexOf('--agent') + 1];
const SESSIONS = option('sessions', 10);
const TURNS = option('turns', 3);
/**
 * `on` (the default): each caller starts talking at its own moment, spread evenly over one utterance, as
 * independent callers do; `off`: all at once, every turn of every session at the same instant (a burst).
 */
const STAGGER = option('stagger', 'on');

const utterance = concat(
  speak('I would like to book a table for two.', { voice: 'festival' }),
  silence(3500),
);
/**
 * `--retry on`: a start answered 503 (no instance admits it: admission by load) is counted and tried again after
 * its Retry-After, up to 5 times, then given up (bench/admission.mjs); otherwise a 503 stops the run.
 */
const RETRY = option('retry', 'off');
let refused = 0;
let givenUp = 0;
const notReady = [];
async function start() {
  for (let tries = 0; ; tries++) {
    const res = await fetch(`${url}/api/agents/${agent}/voice-sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiKeys: { openai: 'k' } }),
    });
    const text = await res.text();
    if (res.ok) return JSON.parse(text);
    if (res.status !== 503 || RETRY !== 'on')
      throw new Error(`start answered ${res.status}: ${text.slice(0, 300)}`);
    refused++;
    if (tries >= 5) {
      givenUp++;
      return undefined;
    }
    await new Promise((r) => setTimeout(r, 1000 * Number(res.headers.get('retry-after') ?? 1)));
  }
}
const clients = [];
const sessionIds = [];
for (let i = 0; i < SESSIONS; i++) {
  const started = await start();
  if (!started) continue;
  const client = new VoiceClient({ url: `${url.replace('http', 'ws')}${started.audioPath}` });
  try {
    await client.ready;
  } catch (err) {
    // under load (bench/admission.mjs) a session may be closed before it is ready: counted, not fatal
    if (RETRY !== 'on') throw err;
    notReady.push(String(err.message));
    continue;
  }
  clients.push(client);
  sessionIds.push(started.sessionId);
  await new Promise((r) => setTimeout(r, 30)); // staggered, as callers are
}
console.log(JSON.stringify({ connected: clients.length }));
const t0 = Date.now();
const utteranceMs = (utterance.length / 16000) * 1000;
await Promise.all(
  clients.map(async (client, i) => {
    if (STAGGER === 'on') await new Promise((r) => setTimeout(r, (i / clients.length) * utteranceMs));
    for (let turn = 0; turn < TURNS; turn++) client.say(utterance);
  }),
);
// a session its instance ended (too far behind real time, under load) plays no more of its queue
const ended = new Map();
for (const client of clients) void client.closed.then((c) => ended.set(client, `${c.code} ${c.reason}`));
while (clients.some((client) => !ended.has(client) && client.micQueuedMs > 0))
  await new Promise((r) => setTimeout(r, 250));
await new Promise((r) => setTimeout(r, 3000));
const figures = clients.flatMap((client) =>
  client.events
    .filter((e) => e.type === 'turn_metrics' && e.metrics.responseMs !== undefined)
    .map((e) => e.metrics),
);
const endedEarly = [...ended.values()];
for (const client of clients) client.close();
await Promise.all(clients.map((client) => client.closed));
const cpu = process.cpuUsage();
console.log(
  JSON.stringify({
    figures,
    talkSeconds: (Date.now() - t0) / 1000,
    sessionIds,
    refused,
    givenUp,
    notReady,
    endedEarly,
    cpuMs: (cpu.user + cpu.system) / 1000,
  }),
);
process.exit(0);
