// What the phone path adds per 20 ms frame of a call, both directions, as the telephony service's relay does it
// (services/telephony/src/calls/phone-relay.ts), on a real nats-server:
//   in   Twilio's `media` message → JSON.parse → base64 → μ-law decode → one 320-byte PCM frame published on
//        voice.<id>.in (the relay publishes two of them as one 640-byte frame since; this still times one
//        20 ms message's work, the publish included, so it overstates the relay's share per frame)
//   out  the agent's 320-byte PCM frame (as voice.<id>.out brings it) → μ-law encode → base64 → Twilio's
//        `media` JSON
// and the resampling the playground does once per frame on each side (LiveKit's AudioResampler, as
// services/playground/src/voice/pcm.ts and models/native-vad.ts use it): in, the line's 8 kHz to the VAD's
// 16 kHz (AudioResamplerQuality.QUICK, as the VAD does); out, a 24 kHz TTS frame to the line's 8 kHz (where a
// provider cannot speak 8 kHz). The total per direction is relay + resampling.
// Prints p50/p99/max per frame in µs, and how many concurrent calls' frames one core could carry at p50.
// Not measured here: the response a caller feels (issue 46's second figure), which needs the whole pipeline.
// `node bench/phone.mjs [--frames 20000]` (build first: `npm run build`).
import { AudioFrame, AudioResampler, AudioResamplerQuality } from '@livekit/rtc-node';
import { connect } from '@nats-io/transport-node';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { startLocalNats } from '../packages/testkit/dist/index.js';
import { decodeMulaw, encodeMulaw } from '../services/telephony/dist/index.js';

const { values } = parseArgs({ options: { frames: { type: 'string', default: '20000' } } });
const FRAMES = Number(values.frames);

const nats = await startLocalNats();
const nc = await connect({ servers: nats.url });
try {
  // a caller's speech-like audio: a tone with a little noise, as μ-law chunks of 160 bytes
  const pcm = Int16Array.from({ length: 160 * 50 }, (_, i) =>
    Math.round(6000 * Math.sin((2 * Math.PI * 220 * i) / 8000) + (Math.random() - 0.5) * 800),
  );
  const inbound = [];
  for (let f = 0; f < 50; f++) {
    const payload = Buffer.from(encodeMulaw(pcm.subarray(f * 160, f * 160 + 160))).toString('base64');
    inbound.push(
      JSON.stringify({
        event: 'media',
        sequenceNumber: String(f + 3),
        streamSid: 'MZ00000000000000000000000000000000',
        media: { track: 'inbound', chunk: String(f), timestamp: String(f * 20), payload },
      }),
    );
  }
  const subject = 'voice.bench-session.in';
  const timeIn = [];
  const timeOut = [];
  const resampleIn = [];
  const resampleOut = [];
  const toVad = new AudioResampler(8000, 16000, 1, AudioResamplerQuality.QUICK);
  const toLine = new AudioResampler(24000, 8000, 1);
  // the agent's speech as a 24 kHz TTS gives it, 20 ms frames
  const tts = Int16Array.from({ length: 480 * 50 }, (_, i) =>
    Math.round(6000 * Math.sin((2 * Math.PI * 220 * i) / 24000)),
  );
  let sink = 0;
  for (let i = 0; i < FRAMES; i++) {
    const text = inbound[i % inbound.length];
    let t = performance.now();
    const m = JSON.parse(text);
    const frame = decodeMulaw(Buffer.from(m.media.payload, 'base64'));
    nc.publish(subject, new Uint8Array(frame.buffer));
    timeIn.push(performance.now() - t);
    t = performance.now();
    for (const f of toVad.push(new AudioFrame(frame, 8000, 1, 160))) sink += f.data.length;
    resampleIn.push(performance.now() - t);

    const spoken = tts.slice((i % 50) * 480, (i % 50) * 480 + 480);
    t = performance.now();
    for (const f of toLine.push(new AudioFrame(spoken, 24000, 1, 480))) sink += f.data.length;
    resampleOut.push(performance.now() - t);

    const agent = pcm.subarray((i % 50) * 160, (i % 50) * 160 + 160);
    t = performance.now();
    const out = JSON.stringify({
      event: 'media',
      streamSid: 'MZ00000000000000000000000000000000',
      media: { payload: Buffer.from(encodeMulaw(agent)).toString('base64') },
    });
    timeOut.push(performance.now() - t);
    sink += out.length;
    if (i % 1000 === 999) await nc.flush();
  }
  await nc.flush();
  const q = (xs, p) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(p * s.length))];
  };
  const us = (ms) => (ms * 1000).toFixed(1);
  console.log(`phone path per 20 ms frame (${FRAMES} frames each way, ${sink} bytes out)`);
  console.log('| direction | p50 µs | p99 µs | max µs | calls one core carries at p50 |');
  console.log('|---|---|---|---|---|');
  const total = (a, b) => a.map((x, i) => x + b[i]);
  for (const [name, xs] of [
    ['in (Twilio → bus)', timeIn],
    ['in: resampling 8 → 16 kHz', resampleIn],
    ['in total', total(timeIn, resampleIn)],
    ['out (bus → Twilio)', timeOut],
    ['out: resampling 24 → 8 kHz', resampleOut],
    ['out total', total(timeOut, resampleOut)],
  ]) {
    const p50 = q(xs, 0.5);
    console.log(
      `| ${name} | ${us(p50)} | ${us(q(xs, 0.99))} | ${us(Math.max(...xs))} | ${Math.floor(20 / p50)} |`,
    );
  }
  toVad.close();
  toLine.close();
} finally {
  await nc.close();
  await nats.dispose();
}
// LiveKit's native resampler (@livekit/rtc-node's FFI) keeps the process alive after its resamplers closed
process.exit(0);
