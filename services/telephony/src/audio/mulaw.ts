/**
 * G.711 μ-law (ITU-T G.711, the telephone network's 8 kHz codec, Twilio Media Streams' `audio/x-mulaw`) to and
 * from 16-bit linear PCM. The standard is fixed, so both directions are tables computed once at load: decoding
 * is one lookup a byte, encoding one lookup a sample (a 64 KiB table over every 16-bit value), which keeps the
 * per-frame cost of a phone call's audio a few microseconds.
 */

const BIAS = 0x84;
const CLIP = 32635;

/** G.711's encoder for one sample (the reference algorithm; the table below is built from it). */
function encodeSample(pcm: number): number {
  let sample = pcm;
  const sign = sample < 0 ? 0x80 : 0;
  if (sign) sample = -sample;
  if (sample > CLIP) sample = CLIP;
  sample += BIAS;
  // the segment: the position of the highest set bit above bit 7
  let exponent = 7;
  for (let mask = 0x4000; (sample & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
  const mantissa = (sample >> (exponent + 3)) & 0x0f;
  return ~(sign | (exponent << 4) | mantissa) & 0xff;
}

function decodeSample(ulaw: number): number {
  const u = ~ulaw & 0xff;
  const exponent = (u >> 4) & 0x07;
  const magnitude = ((((u & 0x0f) << 3) + BIAS) << exponent) - BIAS;
  return u & 0x80 ? -magnitude : magnitude;
}

const DECODE = new Int16Array(256);
for (let i = 0; i < 256; i++) DECODE[i] = decodeSample(i);

/** Indexed by the sample's 16 bits as unsigned (`sample & 0xffff`). */
const ENCODE = new Uint8Array(65536);
for (let i = 0; i < 65536; i++) ENCODE[i] = encodeSample(i >= 32768 ? i - 65536 : i);

/** μ-law bytes → 16-bit PCM, one sample a byte. `out` (when given) must hold `ulaw.length` samples. */
export function decodeMulaw(ulaw: Uint8Array, out = new Int16Array(ulaw.length)): Int16Array {
  for (let i = 0; i < ulaw.length; i++) out[i] = DECODE[ulaw[i]!]!;
  return out;
}

/** 16-bit PCM → μ-law bytes, one byte a sample. `out` (when given) must hold `pcm.length` bytes. */
export function encodeMulaw(pcm: Int16Array, out = new Uint8Array(pcm.length)): Uint8Array {
  for (let i = 0; i < pcm.length; i++) out[i] = ENCODE[pcm[i]! & 0xffff]!;
  return out;
}

/** μ-law's code for silence (a linear 0). */
export const MULAW_SILENCE = 0xff;

/** μ-law: 8000 samples a second, one byte each. */
export const MULAW_RATE = 8000;
