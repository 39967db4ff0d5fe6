#!/usr/bin/env node
// The greeting a phone caller hears (issue 46: the first agent audio within 1.5 s of `start` with instant
// providers). The whole phone path runs: gateway, agents, sessions (processes), the telephony service (a
// process), the playground in this process, the chat and speech stubs (bench/voice-stubs.mjs, a process of
// their own). A stub Twilio (packages/testkit's TwilioCaller, Twilio's protocol exactly) rings a number of a
// live agent through the signed voice webhook, follows the TwiML's Stream and plays what it gets in real time:
// the figure is `start` → the first audible sample played on its line, per call, one call at a time.
// The speech stub's TTS is not instant (it runs espeak-ng and sox per request): its own time to the first byte
// of the greeting is measured apart and printed, so what the backend adds is the difference.
// Usage: npm run build && node bench/phone-greeting.mjs [--calls 10]
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
 * VAD-ended turns with the endpointing delay named, so the wait is known: LiveKit counts it from the VAD's end of
 * speech, which it dates back by the VAD's silence window (so that window is not waited twice).
 */
const ENDPOINTING_MS = 500;
const AUTH_TOKEN = 'bench-twilio-auth-token-0123456789';
const GREETING = 'Hello, how can I help?';
const log = pino({ level: 'silent' });

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
  const greetMs = [];
  const responseMs = [];
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
      const endAt = caller.now() + speechMs;
      caller.say(utterance);
      for (let i = 0; caller.segments[segmentsBefore]?.audibleAt === undefined; i++) {
        if (i > 1500) throw new Error('no reply within 15 s');
        await new Promise((r) => setTimeout(r, 10));
      }
      responseMs.push(caller.segments[segmentsBefore].audibleAt - endAt);
    }
    caller.hangUp();
    await caller.closed;
  }
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
  const beyond = responseMs.map((x) => x - ENDPOINTING_MS - pct(ttsMs, 50));
  console.log(
    `\nresponse a caller feels, ${responseMs.length} turns (end of speech in the μ-law stream → first audible reply)`,
  );
  console.log('| what | p50 ms | p99 ms | max ms |');
  console.log('|---|---|---|---|');
  console.log(
    `| felt | ${f(pct(responseMs, 50))} | ${f(pct(responseMs, 99))} | ${f(Math.max(...responseMs))} |`,
  );
  console.log(
    `| beyond the ${ENDPOINTING_MS} ms wait and the TTS stub's p50 (the STT stub's time still in) | ${f(pct(beyond, 50))} | ${f(pct(beyond, 99))} | ${f(Math.max(...beyond))} |`,
  );
} finally {
  await playground.stop?.(2000);
  telephony.kill();
  for (const p of stack.procs) p.kill();
  stubs.close();
  await nc.close().catch(() => undefined);
  await stack.nats.stop();
  await stack.redis.stop();
}
