import { execFileSync, spawn } from 'node:child_process';
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

/**
 * `speak`, without blocking the event loop (espeak-ng piped into sox): what a stub serving many sessions in a
 * process that is measured must use.
 */
export function speakAsync(text: string, sampleRate = 16000, wordsPerMinute = 170): Promise<Int16Array> {
  return new Promise((resolve, reject) => {
    const espeak = spawn('espeak-ng', ['-s', String(wordsPerMinute), '--stdout', text]);
    const sox = spawn('sox', [
      ...[
        '-t',
        'wav',
        '-',
        '-t',
        'raw',
        '-r',
        String(sampleRate),
        '-e',
        'signed',
        '-b',
        '16',
        '-c',
        '1',
        '-',
      ],
    ]);
    espeak.stdout.pipe(sox.stdin);
    const chunks: Buffer[] = [];
    sox.stdout.on('data', (c: Buffer) => chunks.push(c));
    espeak.on('error', reject);
    sox.on('error', reject);
    sox.on('close', (code) => {
      if (code !== 0) return reject(new Error(`sox exited ${code}`));
      const raw = Buffer.concat(chunks);
      resolve(new Int16Array(raw.buffer, raw.byteOffset, Math.floor(raw.byteLength / 2)).slice());
    });
  });
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
  speech: { input: string; voice: string; authorization: string | undefined; speed?: number | undefined }[];
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
        const { input, voice, speed } = JSON.parse(body.toString('utf8')) as {
          input: string;
          voice: string;
          speed?: number;
        };
        requests.speech.push({ input, voice, authorization, speed });
        if (opts.speechDelayMs) await new Promise((r) => setTimeout(r, opts.speechDelayMs));
        // OpenAI's `speed` (0.25–4, 1 by default) as espeak-ng's words per minute
        const pcm = Buffer.from((await speakAsync(input, 24000, Math.round(170 * (speed ?? 1)))).buffer);
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

/** One `Results` message of Deepgram's live API: the words of `[startMs, endMs]` of the stream. */
function deepgramResults(final: boolean, text: string, startMs: number, endMs: number): string {
  const words = text.split(' ').filter(Boolean);
  return JSON.stringify({
    type: 'Results',
    channel_index: [0, 1],
    duration: (endMs - startMs) / 1000,
    start: startMs / 1000,
    is_final: final,
    speech_final: final,
    channel: {
      alternatives: [
        {
          transcript: text,
          confidence: 0.99,
          words: words.map((w) => ({
            word: w,
            punctuated_word: w,
            start: startMs / 1000,
            end: endMs / 1000,
            confidence: 0.99,
          })),
        },
      ],
    },
    metadata: { request_id: 'stub' },
  });
}

/** What the Deepgram stub saw of one stream: its query, its key, the messages it got and what it answered. */
export interface DeepgramStream {
  query: URLSearchParams;
  authorization: string | undefined;
  controls: string[];
  finals: string[];
}

/**
 * Deepgram's live transcription WebSocket (`/v1/listen`) on loopback, speaking its wire protocol: binary
 * linear16 PCM in at `sample_rate`; `SpeechStarted` when speech begins, interim `Results` while it goes on,
 * and a final one (`is_final`, `speech_final`) once `endpointing` ms of silence follow it; `KeepAlive`,
 * `Finalize` and `CloseStream` honoured. Speech is told from silence by its energy (espeak-ng's is clean);
 * the words are the test's, in order, since a stub cannot recognize speech.
 */
export async function startDeepgramStub(opts: {
  transcribe(index: number, durationMs: number): string;
}): Promise<{ baseURL: string; streams: DeepgramStream[]; close(): Promise<void> }> {
  const { WebSocketServer } = await import('ws');
  const streams: DeepgramStream[] = [];
  let utterances = 0;
  const server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server, path: '/v1/listen' });
  wss.on('connection', (ws, req) => {
    const query = new URL(req.url ?? '/', 'http://stub').searchParams;
    const stream: DeepgramStream = {
      query,
      authorization: req.headers.authorization,
      controls: [],
      finals: [],
    };
    streams.push(stream);
    const rate = Number(query.get('sample_rate') ?? 16000);
    const endpointingMs = Math.max(300, Number(query.get('endpointing')) || 0);
    let audioMs = 0;
    let speechStartMs: number | undefined;
    let lastSpeechMs = 0;
    let interimSent = false;
    const results = deepgramResults;
    const finish = () => {
      if (speechStartMs === undefined) return;
      const text = opts.transcribe(utterances++, lastSpeechMs - speechStartMs);
      stream.finals.push(text);
      ws.send(results(true, text, speechStartMs, lastSpeechMs));
      speechStartMs = undefined;
      interimSent = false;
    };
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) {
        const type = (JSON.parse(data.toString('utf8')) as { type: string }).type;
        stream.controls.push(type);
        if (type === 'Finalize') finish();
        if (type === 'CloseStream') ws.close();
        return;
      }
      const pcm = new Int16Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
      let energy = 0;
      for (const v of pcm) energy += v * v;
      const loud = pcm.length > 0 && Math.sqrt(energy / pcm.length) > 300;
      const frameMs = (pcm.length / rate) * 1000;
      if (loud) {
        if (speechStartMs === undefined) {
          speechStartMs = audioMs;
          ws.send(JSON.stringify({ type: 'SpeechStarted', channel: [0], timestamp: audioMs / 1000 }));
        }
        lastSpeechMs = audioMs + frameMs;
        if (!interimSent && lastSpeechMs - speechStartMs >= 400) {
          // what a streaming recognizer has heard so far: the first words
          interimSent = true;
          const words = opts.transcribe(utterances, 0).split(' ');
          ws.send(
            results(
              false,
              words.slice(0, Math.ceil(words.length / 2)).join(' '),
              speechStartMs,
              lastSpeechMs,
            ),
          );
        }
      } else if (speechStartMs !== undefined && audioMs - lastSpeechMs >= endpointingMs) {
        finish();
      }
      audioMs += frameMs;
    });
  });
  const port = await listenOnLoopback(server);
  return {
    baseURL: `http://127.0.0.1:${port}`,
    streams,
    close: () =>
      new Promise((r) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.close(() => r());
      }),
  };
}
