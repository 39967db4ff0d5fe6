import { execFileSync } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { listenOnLoopback } from './ports.js';

/**
 * Speech made at test time by espeak-ng (Debian's), resampled by sox: 16-bit mono PCM at `sampleRate`.
 * Real speech, so the VAD, the end-of-turn model and the STT's input see what a microphone would give them.
 */
export function speak(text: string, sampleRate = 16000, wordsPerMinute = 170): Int16Array {
  const wav = execFileSync('espeak-ng', ['-s', String(wordsPerMinute), '--stdout', text], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const raw = execFileSync(
    'sox',
    ['-t', 'wav', '-', '-t', 'raw', '-r', String(sampleRate), '-e', 'signed', '-b', '16', '-c', '1', '-'],
    { input: wav, maxBuffer: 64 * 1024 * 1024 },
  );
  return new Int16Array(raw.buffer, raw.byteOffset, Math.floor(raw.byteLength / 2)).slice();
}

export const silence = (ms: number, sampleRate = 16000): Int16Array =>
  new Int16Array(Math.round((ms / 1000) * sampleRate));

export function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Milliseconds of audio in `pcm` at `sampleRate`. */
export const durationMs = (pcm: Int16Array, sampleRate = 16000) => (pcm.length / sampleRate) * 1000;

/** What the speech stub was asked. */
export interface SpeechRequests {
  /** Each transcription request: the WAV's length and what was answered. */
  transcriptions: { durationMs: number; text: string; authorization: string | undefined }[];
  /** Each speech request: the text to say. */
  speech: { input: string; voice: string; authorization: string | undefined }[];
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** The length of the WAV inside a multipart body (its `data` chunk and `fmt` rate). */
function wavDurationMs(body: Buffer): number {
  const riff = body.indexOf('RIFF');
  if (riff < 0) return 0;
  const fmt = body.indexOf('fmt ', riff);
  const rate = body.readUInt32LE(fmt + 12);
  const channels = body.readUInt16LE(fmt + 10);
  const data = body.indexOf('data', fmt);
  const bytes = body.readUInt32LE(data + 4);
  return (bytes / 2 / channels / rate) * 1000;
}

/**
 * OpenAI's speech endpoints on loopback, speaking their real wire protocol: `POST /audio/transcriptions`
 * (multipart WAV in, `{ text }` out — the text is the test's, by the order of the utterances, since a stub
 * cannot recognize speech) and `POST /audio/speech` (`response_format: pcm`: 24 kHz 16-bit mono, spoken by
 * espeak-ng and streamed in chunks as OpenAI does). `speechDelayMs` slows the first byte (a slow TTS).
 */
export async function startSpeechStub(opts: {
  transcribe(index: number, durationMs: number): string;
  speechDelayMs?: number;
}): Promise<{ baseURL: string; requests: SpeechRequests; close(): Promise<void> }> {
  const requests: SpeechRequests = { transcriptions: [], speech: [] };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await bodyOf(req);
      const authorization = req.headers.authorization;
      if (req.method === 'POST' && req.url?.endsWith('/audio/transcriptions')) {
        const durationMs = wavDurationMs(body);
        const text = opts.transcribe(requests.transcriptions.length, durationMs);
        requests.transcriptions.push({ durationMs, text, authorization });
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text }));
        return;
      }
      if (req.method === 'POST' && req.url?.endsWith('/audio/speech')) {
        const { input, voice } = JSON.parse(body.toString('utf8')) as { input: string; voice: string };
        requests.speech.push({ input, voice, authorization });
        if (opts.speechDelayMs) await new Promise((r) => setTimeout(r, opts.speechDelayMs));
        const pcm = Buffer.from(speak(input, 24000).buffer);
        res.writeHead(200, { 'content-type': 'audio/pcm' });
        for (let at = 0; at < pcm.length; at += 4800) res.write(pcm.subarray(at, at + 4800));
        res.end();
        return;
      }
      res.writeHead(404).end();
    })().catch(() => res.destroy());
  });
  const port = await listenOnLoopback(server);
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
