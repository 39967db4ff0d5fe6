import { getFfmpegPath } from '@livekit/av';
import { execFileSync, spawn } from 'node:child_process';

/** A recording decoded to PCM: each channel 16-bit at `sampleRate`, as FFmpeg read the file. */
export interface DecodedRecording {
  channels: number;
  sampleRate: number;
  codec: string;
  left: Int16Array;
  right: Int16Array;
  durationMs: number;
}

function run(args: string[], input: Uint8Array): Promise<{ stdout: Buffer; stderr: string; code: number }> {
  const ffmpeg = getFfmpegPath() ?? 'ffmpeg';
  return new Promise((resolve, reject) => {
    const child = spawn(ffmpeg, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ stdout: Buffer.concat(out), stderr, code: code ?? -1 }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(Buffer.from(input));
  });
}

/**
 * Decodes an Ogg Opus recording with the FFmpeg that @livekit/av bundles (the one LiveKit's recorder writes
 * with): what the file says of itself (codec, rate, channels) and its two channels as PCM.
 */
export async function decodeRecording(file: Uint8Array): Promise<DecodedRecording> {
  const { stdout, stderr, code } = await run(
    ['-hide_banner', '-i', 'pipe:0', '-f', 's16le', '-acodec', 'pcm_s16le', 'pipe:1'],
    file,
  );
  if (code !== 0) throw new Error(`ffmpeg could not decode the recording: ${stderr.slice(-500)}`);
  const stream = /Audio: (\w+), (\d+) Hz, (mono|stereo|\d+ channels)/.exec(stderr);
  if (!stream) throw new Error(`no audio stream in: ${stderr.slice(-500)}`);
  const channels = stream[3] === 'mono' ? 1 : stream[3] === 'stereo' ? 2 : Number.parseInt(stream[3]!, 10);
  const sampleRate = Number(stream[2]);
  const pcm = new Int16Array(stdout.buffer, stdout.byteOffset, Math.floor(stdout.byteLength / 2));
  const frames = Math.floor(pcm.length / channels);
  const left = new Int16Array(frames);
  const right = new Int16Array(frames);
  for (let i = 0; i < frames; i++) {
    left[i] = pcm[i * channels]!;
    right[i] = pcm[i * channels + (channels > 1 ? 1 : 0)]!;
  }
  return { channels, sampleRate, codec: stream[1]!, left, right, durationMs: (frames / sampleRate) * 1000 };
}

/** The RMS level (0..32767) of `pcm` over [fromMs, toMs) at `sampleRate`. */
export function levelOf(pcm: Int16Array, sampleRate: number, fromMs: number, toMs: number): number {
  const from = Math.max(0, Math.floor((fromMs / 1000) * sampleRate));
  const to = Math.min(pcm.length, Math.floor((toMs / 1000) * sampleRate));
  if (to <= from) return 0;
  let sum = 0;
  for (let i = from; i < to; i++) sum += pcm[i]! * pcm[i]!;
  return Math.sqrt(sum / (to - from));
}

/**
 * Writes `file`: `seconds` of a 440 Hz tone, stereo at the recorder's 24 kHz, encoded as the recorder encodes
 * (Ogg Opus at 32 kb/s, by @livekit/av's FFmpeg); sox makes the tone.
 */
export function writeToneRecording(file: string, seconds: number): void {
  const wav = `${file}.wav`;
  execFileSync('sox', [
    '-n',
    '-r',
    '24000',
    '-c',
    '2',
    '-b',
    '16',
    wav,
    'synth',
    String(seconds),
    'sine',
    '440',
  ]);
  execFileSync(getFfmpegPath() ?? 'ffmpeg', [
    '-v',
    'error',
    '-i',
    wav,
    '-c:a',
    'libopus',
    '-b:a',
    '32k',
    '-f',
    'ogg',
    file,
  ]);
}
