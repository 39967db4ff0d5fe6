#!/usr/bin/env node
// Where the caller's turn ends, by default settings (docs/performance.md › Turn-taking): LiveKit's end-of-turn
// model (run locally) and the default endpointing (minEndpointingDelay 500 ms, maxEndpointingDelay 3000 ms), on
// real speech streamed in real time through the gateway's voice socket into ONE playground instance (a process
// of its own). Each of --trials sentences is said twice, each time in a session of its own, one at a time:
// - whole: does its turn end within minEndpointingDelay + 300 ms of the speech (the turn's endOfTurnDelayMs)?
// - with a pause of --pause ms inside it, after a word that cannot end it (an article, a preposition, a
//   possessive, a conjunction: the one nearest the sentence's middle), cut out of the whole sentence's audio
//   so both sides keep its intonation: is the pause held (one user turn, not two)?
// --voice festival (the default: Festival's HTS voice, whose sentence ends the model hears) or espeak (the
// voice the tests used before: the model scores its sentence ends as unfinished, so each turn waits
// maxEndpointingDelay). --rate 8000: the client sends (and the VAD hears) the speech at a phone line's 8 kHz,
// as a phone call's audio reaches the playground (the turn settings stay the web's defaults). The speech is
// made before the sessions start. Prints each trial and the two shares.
// Usage: npm run build && node bench/turn-taking.mjs [--trials 10] [--pause 1000] [--voice festival|espeak]
//        [--rate 16000|8000]
import { loadavg } from 'node:os';
import { join } from 'node:path';
import {
  concat,
  silence,
  speak,
  speakWithPause,
  startLocalNats,
  startLocalRedis,
  voiceFlow,
  VoiceClient,
} from '@vab/testkit';
import { option, sendJson, startCore, startProcess, startVoiceStubs } from './processes.mjs';
import { root } from './lib/figures.mjs';

const TRIALS = option('trials', 10);
const PAUSE_MS = option('pause', 1000);
const VOICE = option('voice', 'festival');
const RATE = option('rate', 16000);
/** The agent node's defaults (packages/flow/src/params.ts). */
const MIN_ENDPOINTING_DELAY = 500;
const MAX_ENDPOINTING_DELAY = 3000;

/** Chosen before any was measured; a caller's lines to a booking desk. */
const SENTENCES = [
  'I would like to book a table for two.',
  'Can I move my appointment to Thursday afternoon?',
  'My name is Maria and I am calling about my order.',
  'Please send the invoice to my office address.',
  'I need a doctor who speaks Spanish.',
  'Is the clinic open on Saturday mornings?',
  'We will arrive at about half past seven.',
  'I lost my card and I want to block it.',
  'Could you tell me how much the check up costs?',
  'My daughter has a fever since yesterday evening.',
].slice(0, TRIALS);

/** Words a sentence cannot end on: a pause after one is a hesitation, not an end. */
const UNFINISHED = new Set(
  'a an the to at on in for of with from about my your our his her their and or but'.split(' '),
);

/** After how many words the pause goes: after the unfinished word nearest the sentence's middle. */
function pauseAfter(sentence) {
  const words = sentence.replace(/[.,?!]/g, '').split(' ');
  let best;
  for (let k = 1; k < words.length; k++) {
    if (!UNFINISHED.has(words[k - 1].toLowerCase())) continue;
    if (best === undefined || Math.abs(k - words.length / 2) < Math.abs(best - words.length / 2)) best = k;
  }
  if (best === undefined) throw new Error(`no word to pause after in "${sentence}"`);
  return best;
}

const withPause = (sentence) => {
  const k = pauseAfter(sentence);
  if (VOICE === 'festival') return speakWithPause(sentence, k, PAUSE_MS, RATE);
  // espeak-ng: the two parts said apart (it has no word timing to cut the whole at)
  const words = sentence.split(' ');
  const said = (text) => speak(text, { voice: 'espeak', sampleRate: RATE });
  return concat(said(words.slice(0, k).join(' ')), silence(PAUSE_MS, RATE), said(words.slice(k).join(' ')));
};

// every line made first: Festival takes ~1 s a sentence, and the clients pace their audio in this process
const lines = SENTENCES.map((s) => ({
  sentence: s,
  whole: speak(s, { voice: VOICE, sampleRate: RATE }),
  paused: withPause(s),
  after: s.split(' ').slice(0, pauseAfter(s)).join(' '),
}));

const nats = await startLocalNats();
const redis = await startLocalRedis();
const env = { NATS_URL: nats.url, REDIS_URL: redis.url, LOG_LEVEL: 'warn', FLOW_EGRESS_ALLOW: '127.0.0.1' };
const { url: base, procs } = await startCore(root, env, { SESSION_RATE_LIMIT_MAX: '1000000000' });
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  { ...env, LOG_LEVEL: 'info', INSTANCE_ID: 'bench-1' },
  'playground instance up',
);
const stubs = await startVoiceStubs(root);
const cleanup = async () => {
  stubs.close();
  for (const p of [...procs, playground]) p.kill();
  await nats.stop();
  await redis.stop();
};

const until = async (done, timeoutMs) => {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** One session: the greeting played, `pcm` said, every answer played; its user turns and the last figures. */
async function trial(agentId, pcm) {
  const started = await sendJson('POST', `${base}/api/agents/${agentId}/voice-sessions`, {
    apiKeys: { openai: 'k' },
    audio: { sampleRate: RATE, frameMs: 20 },
  });
  const client = new VoiceClient({
    url: `${base.replace('http', 'ws')}${started.audioPath}`,
    sampleRate: RATE,
  });
  await client.ready;
  await until(() => client.segments.length >= 1, 20_000);
  client.say(pcm);
  await until(() => client.micQueuedMs === 0, 30_000);
  // every turn the line could still end has ended, and its answer played
  await new Promise((r) => setTimeout(r, MAX_ENDPOINTING_DELAY + 1000));
  await until(() => !client.playing, 20_000);
  client.close();
  await client.closed;
  // the record is closed once its last message is stored
  let record;
  for (let i = 0; i < 100 && record?.status !== 'closed'; i++) {
    record = await sendJson('GET', `${base}/api/agents/${agentId}/test-sessions/${started.sessionId}`);
    if (record.status !== 'closed') await new Promise((r) => setTimeout(r, 100));
  }
  const said = await sendJson(
    'GET',
    `${base}/api/agents/${agentId}/test-sessions/${started.sessionId}/messages`,
  );
  const answers = said.filter((m) => m.role === 'assistant' && m.metrics?.endOfTurnDelayMs !== undefined);
  return {
    userTurns: said.filter((m) => m.role === 'user').length,
    endOfTurnDelayMs: answers.at(-1)?.metrics.endOfTurnDelayMs,
    responseMs: answers.at(-1)?.metrics.responseMs,
  };
}

const fmt = (x) => (x === undefined ? '—' : String(Math.round(x)));
const loadBefore = loadavg()[0];
try {
  const agent = await sendJson('POST', `${base}/api/agents`, {
    name: 'bench turn-taking',
    flow: voiceFlow({ chatURL: stubs.chatURL, speechURL: stubs.speechURL }),
  });
  const bound = MIN_ENDPOINTING_DELAY + 300;
  let ended = 0;
  let held = 0;
  console.log(`\n### Turn-taking, ${VOICE} at ${RATE} Hz, default settings, a ${PAUSE_MS} ms pause\n`);
  console.log('| sentence | whole: endOfTurnDelayMs (responseMs) | paused after | user turns |');
  console.log('| --- | --- | --- | --- |');
  for (const line of lines) {
    const whole = await trial(agent.id, line.whole);
    const paused = await trial(agent.id, line.paused);
    if (whole.userTurns === 1 && whole.endOfTurnDelayMs !== undefined && whole.endOfTurnDelayMs <= bound)
      ended++;
    if (paused.userTurns === 1) held++;
    console.log(
      `| ${line.sentence} | ${fmt(whole.endOfTurnDelayMs)} (${fmt(whole.responseMs)})${whole.userTurns === 1 ? '' : ` in ${whole.userTurns} turns`} | "${line.after}" | ${paused.userTurns} |`,
    );
  }
  console.log(
    `\nwhole sentences whose turn ended within minEndpointingDelay + 300 ms (${bound} ms): **${ended} of ${lines.length}**; ` +
      `pauses held (one user turn): **${held} of ${lines.length}** (load average ${loadBefore.toFixed(1)} → ${loadavg()[0].toFixed(1)})`,
  );
} finally {
  await cleanup();
}
process.exit(0);
