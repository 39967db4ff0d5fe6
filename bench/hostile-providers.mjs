// Another caller's voice start → `ready` while a flow's providers attack the playground (issue 48): real
// processes (agents, sessions, gateway, and one playground instance), the providers' stubs and the callers in
// this one. Per scenario, --attackers voice sessions repeat an attack (their caller speaks again once
// answered) while --probes starts of another caller's session are timed one after another (POST
// …/voice-sessions → the socket's `ready`); every scenario in turn, --rounds times:
//   quiet   nothing else on the instance (the figure the others are held to: p99 ≤ 2× this)
//   benign  the attackers' sessions, talking the same way, with providers that behave
//   tts     the flow's TTS answers 5 MiB (each greeting)
//   stt     the flow's STT answers 5 MiB (each utterance)
//   llm     the flow's LLM answers an event stream of 5 MiB without an event's end
//   word    the flow's LLM answers a 1,000,000-character word, in pieces of 1,000 (each utterance)
//   echo    the flow's STT answers 401 naming the key it was sent
// Prints p50/p99/max per scenario, and whether the playground process is still up at the end.
// Usage: npm run build && node bench/hostile-providers.mjs [--probes 40] [--rounds 2] [--attackers 2]
//   [--scenarios quiet,benign,tts,…]
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  speak,
  startLocalNats,
  startLocalRedis,
  startOpenAiStub,
  startSpeechStub,
  textOf,
  VoiceClient,
  voiceFlow,
} from '@vab/testkit';
import { option, sendJson, startCore, startProcess } from './processes.mjs';

const root = join(fileURLToPath(import.meta.url), '..', '..');
const PROBES = option('probes', 40);
const ROUNDS = option('rounds', 2);
const ATTACKERS = option('attackers', 2);
const SCENARIOS = option('scenarios', 'quiet,benign,tts,stt,llm,word,echo').split(',');
const FLOOD = 5 * 1024 * 1024;
const KEY = 'sk-bench-caller-key-0123456789';

const lastUser = (req) => textOf(req.messages.filter((m) => m.role === 'user').at(-1)?.content);
const [chat, speech, floodSpeech, floodChat, wordChat, echoSpeech] = await Promise.all([
  startOpenAiStub({ chat: (req) => ({ content: `ok: ${lastUser(req)}` }), keepRequests: false }),
  startSpeechStub({ transcribe: () => 'Say one long word please' }),
  startSpeechStub({ transcribe: () => '', flood: { speech: FLOOD, transcriptions: FLOOD } }),
  startOpenAiStub({ chat: () => ({ floodBytes: FLOOD }), keepRequests: false }),
  startOpenAiStub({
    chat: () => ({ content: 'a'.repeat(1_000_000), pieceChars: 1000 }),
    keepRequests: false,
  }),
  startSpeechStub({
    transcribe: () => '',
    fail: (_route, authorization) => ({ status: 401, message: `invalid key ${authorization ?? ''}` }),
  }),
]);

const nats = await startLocalNats();
const redis = await startLocalRedis();
const env = { NATS_URL: nats.url, REDIS_URL: redis.url };
// every start comes from this one address: no session-start rate limit
const core = await startCore(root, env, { SESSION_RATE_LIMIT_MAX: '1000000000' });
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  { ...env, FLOW_EGRESS_ALLOW: '127.0.0.1', ENV_FILE: '/nonexistent/.env', RECORDINGS: 'off' },
  'playground instance up',
);
let exited = null;
playground.on('exit', (code) => (exited = code));

/** The clinic's voice flow with some nodes pointed at other stubs. */
function flowWith(patch) {
  const flow = voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
  flow.nodes = flow.nodes.map((n) => (patch[n.id] ? { ...n, ...patch[n.id] } : n));
  return flow;
}
const agentOf = async (flow) =>
  (await sendJson('POST', `${core.url}/api/agents`, { name: 'bench', flow })).id;

/** Starts a voice session and waits for its `ready`; ms from the POST to it. */
async function start(agentId) {
  const t0 = performance.now();
  const started = await sendJson('POST', `${core.url}/api/agents/${agentId}/voice-sessions`, {
    apiKeys: { openai: KEY },
  });
  const client = new VoiceClient({ url: core.url.replace(/^http/, 'ws') + started.audioPath });
  await client.ready;
  return { client, ms: performance.now() - t0 };
}

const attacks = {
  // the same sessions, talking, with providers that behave: what the attacks are compared with
  benign: { patch: {} },
  tts: { patch: { tts: { baseURL: floodSpeech.baseURL } } },
  stt: { patch: { stt: { baseURL: floodSpeech.baseURL } } },
  llm: { patch: { llm: { baseURL: floodChat.baseURL } } },
  word: { patch: { llm: { baseURL: wordChat.baseURL } } },
  echo: { patch: { stt: { baseURL: echoSpeech.baseURL } } },
};
const utterance = speak('Say one long word please');
const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

/**
 * One attacker: one session, its caller saying the same sentence again once the last one was answered (its
 * error, or a reply), for as long as asked; a `tts` attacker's greeting and every reply meet the TTS.
 */
async function attacker(agentId, running) {
  const { client } = await start(agentId);
  while (running.on) {
    const seen = client.events.length;
    client.say(utterance);
    const t0 = Date.now();
    const answered = () =>
      client.events
        .slice(seen)
        .some((e) => e.type === 'error' || (e.type === 'agent_reply' && e.stepId === 'talk'));
    while (running.on && Date.now() - t0 < 15_000 && !(answered() && client.micQueuedMs === 0))
      await new Promise((r) => setTimeout(r, 100));
  }
  client.close();
  await client.closed;
}

const probeAgent = await agentOf(flowWith({}));
const times = Object.fromEntries(SCENARIOS.map((name) => [name, []]));
// rounds of every scenario in turn: the machine's load moves, and each scenario sees as much of it
for (let round = 0; round < ROUNDS; round++) {
  for (const name of SCENARIOS) {
    const running = { on: true };
    const attack = attacks[name];
    const loops = attack
      ? await agentOf(flowWith(attack.patch)).then((id) =>
          Array.from({ length: ATTACKERS }, () => attacker(id, running)),
        )
      : [];
    // the attacks under way before the first probe
    if (attack) await new Promise((r) => setTimeout(r, 5000));
    for (let i = 0; i < PROBES; i++) {
      const { client, ms } = await start(probeAgent);
      times[name].push(ms);
      client.close();
      await client.closed;
      await new Promise((r) => setTimeout(r, 250));
    }
    running.on = false;
    await Promise.all(loops);
  }
}
for (const name of SCENARIOS) {
  const t = times[name];
  console.log(
    JSON.stringify({
      scenario: name,
      attackers: attacks[name] ? ATTACKERS : 0,
      probes: t.length,
      startToReadyMs: {
        p50: Math.round(quantile(t, 0.5)),
        p99: Math.round(quantile(t, 0.99)),
        max: Math.round(Math.max(...t)),
      },
    }),
  );
}
console.log(JSON.stringify({ playgroundUp: exited === null }));

for (const p of [playground, ...core.procs]) p.kill('SIGTERM');
await Promise.all([chat, speech, floodSpeech, floodChat, wordChat, echoSpeech].map((s) => s.close()));
await nats.dispose();
await redis.dispose();
process.exit(0);
