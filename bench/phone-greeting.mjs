#!/usr/bin/env node
// The greeting a phone caller hears (issue 46: the first agent audio within 1.5 s of `start` with instant
// providers). The whole phone path runs: gateway, agents, sessions (processes), the telephony service (a
// process), the playground in this process, the chat and speech stubs (bench/voice-stubs.mjs, a process of
// their own). A stub Twilio (packages/testkit's TwilioCaller, Twilio's protocol exactly) rings a number of a
// live agent through the signed voice webhook, follows the TwiML's Stream and plays what it gets in real time:
// the figure is `start` → the first audible sample played on its line, per call, one call at a time.
// The speech stub's TTS is not instant (it runs espeak-ng and sox per request): its own time to the first byte
// of the greeting is measured apart and printed, so what the backend adds is the difference.
// Then `--turns` spoken turns per call: the response a caller feels, as issue 46 measures it (the end of their
// speech in the μ-law stream → the first audible reply sample sent back on the stream, both on the stub Twilio's
// clock; also printed: when the stub played it, after its own 20 ms playout tick, as Twilio plays a call's audio
// from its buffer), split per turn with the call's own stored figures (GET …/calls/:callId, each reply's
// `metrics`, measured by the playground on the audio itself from the VAD's end of speech):
//   wait      the endpointing delay in force (VAD turns: a fixed minimum, `--endpointing`, the phone default 600)
//   stubs     the providers' own time: the LLM's first token and the TTS's first byte (LiveKit's `llmTtftMs`,
//             `ttsTtfbMs`), and the STT's only where its transcript came after the wait (`transcriptionDelayMs`
//             beyond it: the turn waited on it; the chat and STT stubs answer at once, the TTS runs espeak-ng)
//   ours      the rest: sent back − wait − stubs, itself split into
//             decision  `endOfTurnDelayMs` beyond the wait and the STT: LiveKit's turn decision, the VAD's lag
//             pipeline  `responseMs` − `endOfTurnDelayMs` − the LLM's and TTS's times: from the turn's commit
//                       to the first audible agent frame leaving the playground (as bench/voice.mjs's overhead)
//             line      sent back − `responseMs`: where the VAD dates the end past the sound's (no clock: the
//                       same audio through the process's VAD; LiveKit's own dating printed beside it), and the
//                       phone path both ways: the stream's 20 ms frames in, μ-law decode, resampling, the bus to
//                       the playground, the bus back, μ-law encode and the telephony service's pacing
// Usage: npm run build && node bench/phone-greeting.mjs [--calls 10] [--turns 2] [--endpointing 600]
import { connectNats } from '@vab/bus';
import { loadConfig, startPlaygroundService } from '@vab/playground';
import { postTwilioWebhook, speak, streamOf, TwilioCaller, voiceFlow } from '@vab/testkit';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { pino } from 'pino';
import {
  option,
  sendJson,
  startCoreStack,
  startProcess,
  startVoiceStubs,
  voiceConfig,
} from './processes.mjs';
import { pct, root as here } from './lib/figures.mjs';

const CALLS = option('calls', 10);
/** Spoken turns per call after the greeting: the response a caller feels. */
const TURNS = option('turns', 2);
/**
 * VAD-ended turns with the endpointing delay named, so the wait is known (the phone default, docs/api.md
 * "Phone-grade turn handling"): LiveKit counts it from the VAD's end of speech, which it dates back by the VAD's
 * silence window (so that window is not waited twice).
 */
const ENDPOINTING_MS = option('endpointing', 600);
const AUTH_TOKEN = 'bench-twilio-auth-token-0123456789';
const GREETING = 'Hello, how can I help?';
const log = pino({ level: 'silent' });

/**
 * Where the playground's VAD dates this speech's end (its END_OF_SPEECH's dating, the moment LiveKit counts
 * the endpointing wait and `responseMs` from) past the sound's own end, in the audio's time: the utterance in
 * the line's 20 ms frames through the process's VAD, no clock. The same on every turn (the same audio), and in
 * `responseMs`'s start, so the part of felt − `responseMs` that is not the line's transport.
 */
async function vadEndLag(pcm, soundEndMs, soundDating = true) {
  // LiveKit's logger is the in-process playground's, set up when it started
  const { VADEventType } = await import('@livekit/agents');
  const { AudioFrame } = await import('@livekit/rtc-node');
  const { SessionVad } = await import(join(here, 'services/playground/dist/models/voice-models.js'));
  const { NativeVadStream, VAD_OPTIONS } = await import(
    join(here, 'services/playground/dist/models/native-vad.js')
  );
  const stream = new NativeVadStream(new SessionVad(), undefined, VAD_OPTIONS, soundDating);
  const padded = new Int16Array(pcm.length + 8000);
  padded.set(pcm);
  for (let i = 0; i + 160 <= padded.length; i += 160)
    stream.pushFrame(new AudioFrame(padded.slice(i, i + 160), 8000, 1, 160));
  stream.endInput();
  let end;
  for await (const ev of stream) if (ev.type === VADEventType.END_OF_SPEECH) end ??= stream.lastSpeechEndMs;
  return end === undefined ? NaN : end - soundEndMs;
}

const T0 = performance.now();
const stamp = (what) => process.env.BENCH_DEBUG && console.error(what, Math.round(performance.now() - T0));
const stack = await startCoreStack(here);
const stubs = await startVoiceStubs(here);
const telPort = 20000 + Math.floor(Math.random() * 20000);
// info: its ready line is an info one
const telephony = await startProcess(
  join(here, 'services/telephony/dist/main.js'),
  {
    ...stack.env,
    LOG_LEVEL: 'info',
    TWILIO_AUTH_TOKEN: AUTH_TOKEN,
    TELEPHONY_PORT: String(telPort),
    TELEPHONY_HOST: '127.0.0.1',
  },
  'telephony listening',
);
const nc = await connectNats({ url: stack.env.NATS_URL, name: 'bench', service: 'playground' }, log);
const playground = startPlaygroundService({ nc, log, config: voiceConfig(loadConfig, 5, 'on') });
await playground.ready;
try {
  const agent = await sendJson('POST', `${stack.url}/api/agents`, {
    name: 'bench phone',
    flow: voiceFlow({
      chatURL: stubs.chatURL,
      speechURL: stubs.speechURL,
      agent: { turnDetection: 'vad', minEndpointingDelay: ENDPOINTING_MS, preemptiveGeneration: false },
    }),
  });
  const deploy = await sendJson('POST', `${stack.url}/api/agents/${agent.id}/deploys`, {});
  for (let i = 0; ; i++) {
    const list = await sendJson('GET', `${stack.url}/api/agents/${agent.id}/deploys`);
    if (list.find((d) => d.id === deploy.id)?.status === 'live') break;
    if (i > 300) throw new Error('the deploy did not go live');
    await new Promise((r) => setTimeout(r, 100));
  }
  const number = '+14155550100';
  await sendJson('POST', `${stack.url}/api/phone-numbers`, { number, provider: 'twilio', agentId: agent.id });

  // the TTS stub's own time to the greeting's first byte (what "instant providers" would not take)
  const ttsMs = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    const res = await fetch(`${stubs.speechURL}/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
      body: JSON.stringify({ model: 'tts-1', voice: 'alloy', input: GREETING, response_format: 'pcm' }),
    });
    const reader = res.body.getReader();
    await reader.read();
    ttsMs.push(performance.now() - t);
    await reader.cancel();
  }

  // real speech (Festival's HTS voice) at the line's 8 kHz, and where its sound ends (its tail is silence)
  const utterance = speak('I would like to book a table for two tonight.', {
    voice: 'festival',
    sampleRate: 8000,
  });
  let last = utterance.length - 1;
  while (last > 0 && Math.abs(utterance[last]) < 500) last--;
  const speechMs = (last + 1) / 8;
  const vadLagMs = await vadEndLag(utterance, speechMs);
  // where LiveKit's own VAD would date it (the last window over the threshold): for comparison, not used
  const modelLagMs = await vadEndLag(utterance, speechMs, false);
  const greetMs = [];
  /** Per turn: what the caller felt, and the call it was in (its stored figures are read once it has ended). */
  const felt = [];
  for (let c = 0; c < CALLS; c++) {
    const callSid = `CA${String(c + 1).padStart(32, '0')}`;
    const answer = await postTwilioWebhook(`http://127.0.0.1:${telPort}/telephony/twilio/voice`, AUTH_TOKEN, {
      CallSid: callSid,
      AccountSid: 'AC00000000000000000000000000000000',
      From: '+14155550123',
      To: number,
      CallStatus: 'ringing',
      Direction: 'inbound',
    });
    const stream = streamOf(answer.body);
    if (!stream) throw new Error(`no stream in ${answer.body}`);
    const caller = new TwilioCaller({
      url: stream.url,
      authToken: AUTH_TOKEN,
      callSid,
      parameters: stream.parameters,
    });
    await caller.opened;
    for (let i = 0; caller.segments[0]?.audibleAt === undefined; i++) {
      if (i > 1000) throw new Error('no greeting within 10 s');
      await new Promise((r) => setTimeout(r, 10));
    }
    greetMs.push(caller.segments[0].audibleAt);
    for (let t = 0; t < TURNS; t++) {
      for (let i = 0; caller.playing || caller.micQueuedMs > 0; i++) {
        if (i > 3000) throw new Error('the agent kept speaking');
        await new Promise((r) => setTimeout(r, 10));
      }
      const segmentsBefore = caller.segments.length;
      caller.say(utterance);
      // the next frame out carries the speech's start: it covers the line's time from `frames` × 20 ms on (read
      // at once, no tick can run between), so its end in the stream is known to the sample, not to a tick
      const endAt = caller.streamMs + speechMs;
      for (let i = 0; caller.segments[segmentsBefore]?.audibleAt === undefined; i++) {
        if (i > 1500) throw new Error('no reply within 15 s');
        await new Promise((r) => setTimeout(r, 10));
      }
      const reply = caller.segments[segmentsBefore];
      felt.push({ call: c, turn: t, ms: reply.audibleAt - endAt, sentMs: reply.sentAt - endAt });
    }
    caller.hangUp();
    await caller.closed;
  }
  stamp('calls done');
  // each call's stored figures, once it has ended: its replies to spoken turns carry `responseMs` (the greeting,
  // answering no speech, does not), in the order of the turns
  // (one call at a time: the oldest is the first rung)
  const figuresOf = [];
  for (let i = 0; ; i++) {
    const { calls } = await sendJson(
      'GET',
      `${stack.url}/api/agents/${agent.id}/calls?channel=phone&limit=100`,
    );
    const ended = calls.filter((c) => c.status === 'ended').sort((a, b) => a.startedAt - b.startedAt);
    if (ended.length >= CALLS) {
      for (const c of ended) {
        const call = await sendJson('GET', `${stack.url}/api/agents/${agent.id}/calls/${c.id}`);
        if (process.env.BENCH_DEBUG) console.error(JSON.stringify(call.messages));
        const replies = call.messages.filter(
          (m) => m.role === 'assistant' && m.metrics?.responseMs !== undefined,
        );
        figuresOf.push(replies.map((m) => m.metrics));
      }
      break;
    }
    if (i > 300) throw new Error(`${ended.length} of ${CALLS} calls ended`);
    await new Promise((r) => setTimeout(r, 100));
  }
  stamp('figures read');
  const f = (x) => x.toFixed(0);
  console.log(
    `phone greeting, ${CALLS} calls one at a time, load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
  );
  console.log('| what | p50 ms | max ms |');
  console.log('|---|---|---|');
  console.log(
    `| start → first audible greeting sample on the line | ${f(pct(greetMs, 50))} | ${f(Math.max(...greetMs))} |`,
  );
  console.log(
    `| the TTS stub's own time to its first byte | ${f(pct(ttsMs, 50))} | ${f(Math.max(...ttsMs))} |`,
  );
  console.log(`| what the backend adds (p50 difference) | ${f(pct(greetMs, 50) - pct(ttsMs, 50))} | |`);
  // per turn, the felt response split (ms); a turn whose reply carries no stored figures is counted apart
  const parts = {
    felt: [],
    wait: [],
    stt: [],
    llm: [],
    tts: [],
    sent: [],
    playout: [],
    ours: [],
    decision: [],
    pipeline: [],
    line: [],
  };
  let unmatched = 0;
  for (const { call, turn, ms: heard, sentMs: ms } of felt) {
    const m = figuresOf[call]?.[turn];
    if (m?.endOfTurnDelayMs === undefined) {
      unmatched++;
      continue;
    }
    const stt = Math.max(0, (m.transcriptionDelayMs ?? 0) - ENDPOINTING_MS);
    const llm = m.llmTtftMs ?? 0;
    const tts = m.ttsTtfbMs ?? 0;
    parts.felt.push(heard);
    parts.sent.push(ms);
    parts.playout.push(heard - ms);
    parts.wait.push(ENDPOINTING_MS);
    parts.stt.push(stt);
    parts.llm.push(llm);
    parts.tts.push(tts);
    parts.ours.push(ms - ENDPOINTING_MS - stt - llm - tts);
    parts.decision.push(m.endOfTurnDelayMs - ENDPOINTING_MS - stt);
    parts.pipeline.push(m.responseMs - m.endOfTurnDelayMs - llm - tts);
    parts.line.push(ms - m.responseMs);
  }
  console.log(
    `\nresponse a caller feels, ${parts.felt.length} turns (end of speech in the μ-law stream → first audible reply sent back on it, and as the stub Twilio played it)` +
      (unmatched > 0 ? `; ${unmatched} turns without stored figures left out` : ''),
  );
  console.log('| part | p50 ms | p99 ms | max ms |');
  console.log('|---|---|---|---|');
  const row = (name, xs) =>
    console.log(`| ${name} | ${f(pct(xs, 50))} | ${f(pct(xs, 99))} | ${f(Math.max(...xs))} |`);
  row('felt on the line (the stub Twilio played it)', parts.felt);
  row("  of it: the stub Twilio's playout (its 20 ms tick, its buffer)", parts.playout);
  row('felt: sent back on the stream (the goal’s measure)', parts.sent);
  row(`the endpointing wait in force (VAD turns, minEndpointingDelay)`, parts.wait);
  row('the STT stub, where its transcript came after the wait', parts.stt);
  row("the LLM stub's first token (llmTtftMs)", parts.llm);
  row("the TTS stub's first byte (ttsTtfbMs)", parts.tts);
  row('**ours: sent back − wait − stubs**', parts.ours);
  row('  of it: the turn decision beyond the wait (endOfTurnDelayMs − wait − STT)', parts.decision);
  row(
    '  of it: commit → first audible frame out of the playground (responseMs − endOfTurnDelayMs − LLM − TTS)',
    parts.pipeline,
  );
  row('  of it: sent back − responseMs', parts.line);
  row(
    `    of that: where the VAD dates the speech's end past the sound's (its own time, the same audio each turn; LiveKit's dating: ${f(modelLagMs)})`,
    parts.line.map(() => vadLagMs),
  );
  row(
    "    of that: the line both ways (the stream's 20 ms frames in, decode, resampling, the bus, encode, pacing)",
    parts.line.map((x) => x - vadLagMs),
  );
} finally {
  stamp('stopping');
  await playground.stop?.(2000);
  telephony.kill();
  for (const p of stack.procs) p.kill();
  stubs.close();
  await nc.close().catch(() => undefined);
  await stack.nats.stop();
  await stack.redis.stop();
}
// something of the stack's (a child's pipe, a client's timer) can hold the loop for minutes after the stop:
// the figures are printed, the processes killed
process.exit(0);
