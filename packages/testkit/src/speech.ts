import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { WebSocket, WebSocketServer } from 'ws';
import { concatPcm, pcmSilence } from '@vab/contracts';
import { flood } from './openai-stub.js';
import { listenOnLoopback } from './ports.js';

/**
 * The voices tests speak with. `espeak`: Debian's espeak-ng, fast (~10 ms a sentence) and flat, for everything
 * that does not depend on prosody. `festival`: Festival's HTS voice (Debian's `festival` and
 * `festvox-us-slt-hts`), ~0.7 s a sentence, whose intonation LiveKit's end-of-turn model hears as speech: it
 * scores its sentence ends 0.46–0.57, over the English threshold (0.36), where espeak-ng's score 0.24–0.37, as
 * low as the same sentences cut in half (docs/performance.md › Turn-taking). Where turns end, speak with it.
 */
export type TestVoice = 'espeak' | 'festival';

export interface SpeakOptions {
  /** 16 kHz unless set. */
  sampleRate?: number;
  /** 170 unless set: espeak-ng's rate; Festival's own pace is taken as 170 and scaled. */
  wordsPerMinute?: number;
  voice?: TestVoice;
}

/** A voice's command (text on its standard input, 16-bit mono PCM at `RAW_RATE` out) for `options`. */
function voiceCommand(voice: TestVoice, wordsPerMinute: number): [string, string[]] {
  if (voice === 'espeak') return ['espeak-ng', ['-s', String(wordsPerMinute), '--stdin', '--stdout']];
  // raw PCM: the WAV text2wave writes to a pipe says its data is 0 bytes long. `-r` is the HTS engine's rate
  const rate = `(set! hts_engine_params (append hts_engine_params (list (list "-r" ${wordsPerMinute / 170}))))`;
  const args = ['-eval', '(voice_cmu_us_slt_arctic_hts)', '-eval', rate];
  return ['text2wave', [...args, '-otype', 'raw', '-F', String(RAW_RATE), '-o', '-']];
}

/** Festival's raw output rate (its HTS voice's own); espeak-ng writes a WAV, whose header says its rate. */
const RAW_RATE = 32000;

/** sox's arguments: the voice's output in, 16-bit mono PCM at `sampleRate` out. */
function soxArgs(voice: TestVoice, sampleRate: number): string[] {
  const input =
    voice === 'espeak'
      ? ['-t', 'wav', '-']
      : ['-t', 'raw', '-r', String(RAW_RATE), '-e', 'signed', '-b', '16', '-c', '1', '-'];
  return [...input, '-t', 'raw', '-r', String(sampleRate), '-e', 'signed', '-b', '16', '-c', '1', '-'];
}

const optionsOf = (rate: number | SpeakOptions | undefined, wordsPerMinute: number | undefined) => {
  const o = typeof rate === 'object' ? rate : { sampleRate: rate, wordsPerMinute };
  return {
    sampleRate: o.sampleRate ?? 16000,
    wordsPerMinute: o.wordsPerMinute ?? 170,
    voice: o.voice ?? ('espeak' as TestVoice),
  };
};

const pcmOf = (raw: Buffer) =>
  new Int16Array(raw.buffer, raw.byteOffset, Math.floor(raw.byteLength / 2)).slice();

/**
 * Speech made at test time (espeak-ng unless `voice` says otherwise), resampled by sox: 16-bit mono PCM at
 * `sampleRate`. Real speech, so the VAD, the end-of-turn model and the STT's input see what a microphone would
 * give them. `speak(text, 48_000)` or `speak(text, { voice: 'festival' })`.
 */
export function speak(text: string, rate?: number | SpeakOptions, wordsPerMinute?: number): Int16Array {
  const o = optionsOf(rate, wordsPerMinute);
  const [command, args] = voiceCommand(o.voice, o.wordsPerMinute);
  const spoken = execFileSync(command, args, { input: text, maxBuffer: 64 * 1024 * 1024 });
  return pcmOf(
    execFileSync('sox', soxArgs(o.voice, o.sampleRate), { input: spoken, maxBuffer: 64 * 1024 * 1024 }),
  );
}

/**
 * `speak`, without blocking the event loop (the voice piped into sox): what a stub serving many sessions in a
 * process that is measured must use.
 */
export function speakAsync(
  text: string,
  rate?: number | SpeakOptions,
  wordsPerMinute?: number,
): Promise<Int16Array> {
  const o = optionsOf(rate, wordsPerMinute);
  const [command, args] = voiceCommand(o.voice, o.wordsPerMinute);
  return new Promise((resolve, reject) => {
    const voice = spawn(command, args);
    const sox = spawn('sox', soxArgs(o.voice, o.sampleRate));
    voice.stdin.end(text);
    voice.stdout.pipe(sox.stdin);
    const chunks: Buffer[] = [];
    sox.stdout.on('data', (c: Buffer) => chunks.push(c));
    voice.on('error', reject);
    sox.on('error', reject);
    sox.on('close', (code) => {
      if (code !== 0) return reject(new Error(`sox exited ${code}`));
      resolve(pcmOf(Buffer.concat(chunks)));
    });
  });
}

/** A string as a Scheme literal (Festival's command language). */
const schemeString = (text: string) => `"${text.replace(/[\\"]/g, (c) => `\\${c}`)}"`;

/**
 * Festival's HTS voice saying `text` as one sentence with a hesitation: silent for `pauseMs` after its first
 * `afterWords` words (as Festival counts them: a number may be several), where its own timing says the word
 * ends. Cut out of the whole sentence, so both sides keep the sentence's intonation: two utterances would each
 * end as a sentence does, falling.
 */
export function speakWithPause(
  text: string,
  afterWords: number,
  pauseMs: number,
  sampleRate = 16000,
): Int16Array {
  const dir = mkdtempSync(join(tmpdir(), 'festival-'));
  try {
    const raw = join(dir, 'speech.raw');
    const out = execFileSync('festival', [
      '-b',
      '(voice_cmu_us_slt_arctic_hts)',
      `(set! utt (SynthText ${schemeString(text)}))`,
      `(mapcar (lambda (w) (format t "%f\\n" (item.feat w "word_end"))) (utt.relation.items utt 'Word))`,
      `(utt.wave.resample utt ${RAW_RATE})`,
      `(utt.save.wave utt ${schemeString(raw)} 'raw)`,
    ]).toString('utf8');
    const ends = out.trim().split('\n').map(Number);
    if (afterWords < 1 || afterWords >= ends.length)
      throw new Error(`no word boundary after word ${afterWords} of ${ends.length}`);
    const pcm = pcmOf(
      execFileSync('sox', soxArgs('festival', sampleRate), { input: readFileSync(raw), maxBuffer: 64 << 20 }),
    );
    const cut = Math.round(ends[afterWords - 1]! * sampleRate);
    return concat(pcm.subarray(0, cut), silence(pauseMs, sampleRate), pcm.subarray(cut));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `ms` of silence at `sampleRate` (16 kHz unless set). */
export const silence = (ms: number, sampleRate = 16000): Int16Array => pcmSilence(ms, sampleRate);

export const concat = (...parts: Int16Array[]): Int16Array => concatPcm(parts);

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

/** A running speech stub (`startSpeechStub`). */
export type SpeechStub = Awaited<ReturnType<typeof startSpeechStub>>;

/**
 * OpenAI's speech endpoints on loopback, speaking their real wire protocol: `POST /audio/transcriptions`
 * (multipart WAV in, `{ text }` out — the text is the test's, by the order of the utterances, since a stub
 * cannot recognize speech) and `POST /audio/speech` (`response_format: pcm`: 24 kHz 16-bit mono, spoken by
 * espeak-ng and streamed in chunks as OpenAI does). `speechDelayMs` slows the first byte (a slow TTS).
 */
export async function startSpeechStub(opts: {
  transcribe(index: number, durationMs: number): string;
  speechDelayMs?: number;
  /**
   * Answer a route with an OpenAI error instead (`{ error: { message } }` with the status): e.g. a 401 that
   * echoes the key it was sent, as some providers do.
   */
  fail?: (
    route: 'transcriptions' | 'speech',
    authorization: string | undefined,
  ) => { status: number; message: string } | undefined;
  /** Answer a route with this many bytes (spaces, 200): more than any client should read. */
  flood?: Partial<Record<'transcriptions' | 'speech', number>>;
}): Promise<{ baseURL: string; requests: SpeechRequests; close(): Promise<void> }> {
  const requests: SpeechRequests = { transcriptions: [], speech: [] };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await bodyOf(req);
      const authorization = req.headers.authorization;
      if (req.method !== 'POST') return void res.writeHead(404).end();
      const route = req.url?.endsWith('/audio/transcriptions')
        ? 'transcriptions'
        : req.url?.endsWith('/audio/speech')
          ? 'speech'
          : undefined;
      if (!route) return void res.writeHead(404).end();
      // every request is on record, whatever it is answered
      let text = '';
      let speech: { input: string; voice: string; speed?: number } | undefined;
      if (route === 'transcriptions') {
        const durationMs = wavDurationMs(body);
        text = opts.transcribe(requests.transcriptions.length, durationMs);
        requests.transcriptions.push({ durationMs, text, authorization });
      } else {
        speech = JSON.parse(body.toString('utf8')) as { input: string; voice: string; speed?: number };
        requests.speech.push({ ...speech, authorization });
      }
      const failure = opts.fail?.(route, authorization);
      if (failure) {
        res
          .writeHead(failure.status, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: failure.message, type: 'invalid_request_error' } }));
        return;
      }
      const flooding = opts.flood?.[route];
      if (flooding) return flood(res, speech ? 'audio/pcm' : 'application/json', flooding);
      if (!speech) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text }));
        return;
      }
      if (opts.speechDelayMs) await new Promise((r) => setTimeout(r, opts.speechDelayMs));
      // OpenAI's `speed` (0.25–4, 1 by default) as espeak-ng's words per minute
      const pcm = Buffer.from(
        (await speakAsync(speech.input, 24000, Math.round(170 * (speech.speed ?? 1)))).buffer,
      );
      res.writeHead(200, { 'content-type': 'audio/pcm' });
      for (let at = 0; at < pcm.length; at += 4800) res.write(pcm.subarray(at, at + 4800));
      res.end();
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
    close: () => closeSocketServer(server, wss),
  };
}

/** Ends a stub's WebSocket server: its clients cut off, then its HTTP server closed. */
function closeSocketServer(server: Server, wss: WebSocketServer): Promise<void> {
  return new Promise((r) => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.close(() => r());
  });
}

/** 16-bit PCM as base64, the way ElevenLabs' WebSocket carries it. */
const base64Of = (pcm: Int16Array) =>
  Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString('base64');

/** What the ElevenLabs stub saw of one WebSocket: its path and query, its key, and each context's text. */
export interface ElevenLabsSocket {
  path: string;
  query: URLSearchParams;
  apiKey: string | undefined;
  /** The text each context was sent, by context id, as it was flushed (one entry per flush). */
  contexts: Map<string, string[]>;
}

/** One ElevenLabs socket: its contexts' text spoken at each flush, `isFinal` once a closed one's audio is out. */
function speakElevenLabs(ws: WebSocket, seen: ElevenLabsSocket, rate: number): void {
  /** Per context: the text not yet flushed, where its audio has reached (ms), and its work in order. */
  const contexts = new Map<string, { pending: string; atMs: number; work: Promise<void> }>();
  const contextOf = (id: string) => {
    let c = contexts.get(id);
    if (!c) {
      c = { pending: '', atMs: 0, work: Promise.resolve() };
      contexts.set(id, c);
      if (!seen.contexts.has(id)) seen.contexts.set(id, []);
    }
    return c;
  };
  const send = (message: object) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message));
  };
  const speakFlushed = async (id: string, text: string) => {
    const c = contexts.get(id)!;
    const pcm = await speakAsync(text, rate);
    const durationMs = (pcm.length / rate) * 1000;
    const chars = [...text];
    const alignment = {
      chars,
      charStartTimesMs: chars.map((_, i) => Math.round(c.atMs + (i * durationMs) / chars.length)),
      charsDurationsMs: chars.map(() => Math.round(durationMs / chars.length)),
    };
    c.atMs += durationMs;
    // in chunks of 250 ms, as the service streams them; the alignment comes with the first
    const chunk = Math.round(rate / 4);
    for (let at = 0; at < pcm.length; at += chunk) {
      send({
        audio: base64Of(pcm.subarray(at, at + chunk)),
        ...(at === 0 ? { alignment, normalizedAlignment: alignment } : {}),
        contextId: id,
      });
    }
  };
  ws.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString('utf8')) as {
      text?: string;
      context_id?: string;
      flush?: boolean;
      close_context?: boolean;
      close_socket?: boolean;
    };
    if (m.close_socket) {
      ws.close(1000);
      return;
    }
    const id = m.context_id ?? '';
    const c = contextOf(id);
    if (typeof m.text === 'string') c.pending += m.text;
    if (m.flush && c.pending.trim() !== '') {
      const text = c.pending.trim();
      c.pending = '';
      seen.contexts.get(id)!.push(text);
      c.work = c.work.then(() => speakFlushed(id, text));
    }
    if (m.close_context) {
      c.work = c.work.then(() => {
        send({ isFinal: true, contextId: id });
        contexts.delete(id);
      });
    }
  });
}

/**
 * ElevenLabs' multi-context TTS WebSocket (`/v1/text-to-speech/{voice}/multi-stream-input`) on loopback,
 * speaking its wire protocol: the key in `xi-api-key`; the client opens a context with `{ text: " ",
 * voice_settings, context_id }`, sends `{ text, context_id, flush? }` and ends it with `{ context_id,
 * close_context: true }` (or `{ close_socket: true }`); the server answers each flush with the flushed text
 * spoken by espeak-ng, as `{ audio: base64 PCM at output_format's rate, alignment, normalizedAlignment,
 * contextId }` messages (character times from the context's start, the sentence's time spread evenly over its
 * characters), and a closed context, once its audio has gone, with `{ isFinal: true, contextId }`.
 */
export async function startElevenLabsStub(): Promise<{
  baseURL: string;
  sockets: ElevenLabsSocket[];
  close(): Promise<void>;
}> {
  const { WebSocketServer } = await import('ws');
  const sockets: ElevenLabsSocket[] = [];
  const server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://stub');
    if (!/^\/v1\/text-to-speech\/[^/]+\/multi-stream-input$/.test(url.pathname)) {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const seen: ElevenLabsSocket = {
        path: url.pathname,
        query: url.searchParams,
        apiKey: req.headers['xi-api-key'] as string | undefined,
        contexts: new Map(),
      };
      sockets.push(seen);
      const rate = Number(/^pcm_(\d+)$/.exec(url.searchParams.get('output_format') ?? '')?.[1] ?? 22050);
      speakElevenLabs(ws, seen, rate);
    });
  });
  const port = await listenOnLoopback(server);
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    sockets,
    close: () => closeSocketServer(server, wss),
  };
}

/** What the Deepgram TTS stub saw of one stream: its query, its key, and the text of each `Speak`. */
export interface DeepgramSpeakStream {
  query: URLSearchParams;
  authorization: string | undefined;
  texts: string[];
}

/**
 * Deepgram's streaming TTS WebSocket (`/v1/speak`) on loopback, speaking its wire protocol: the key in
 * `Authorization: Token …`, the format in the query (`encoding=linear16`, `sample_rate`); the client sends
 * `{ type: "Speak", text }`, `{ type: "Flush" }` and `{ type: "Close" }`; the server sends `Metadata` on
 * connecting, the text spoken since the last flush (espeak-ng) as binary linear16 PCM in chunks, then
 * `{ type: "Flushed", sequence_id }`, and closes the socket on `Close`.
 */
export async function startDeepgramSpeakStub(): Promise<{
  baseURL: string;
  streams: DeepgramSpeakStream[];
  close(): Promise<void>;
}> {
  const { WebSocketServer } = await import('ws');
  const streams: DeepgramSpeakStream[] = [];
  const server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server, path: '/v1/speak' });
  wss.on('connection', (ws, req) => {
    const query = new URL(req.url ?? '/', 'http://stub').searchParams;
    const stream: DeepgramSpeakStream = { query, authorization: req.headers.authorization, texts: [] };
    streams.push(stream);
    const rate = Number(query.get('sample_rate') ?? 24000);
    let pending = '';
    let sequence = 0;
    let work = Promise.resolve();
    ws.send(
      JSON.stringify({
        type: 'Metadata',
        request_id: `stub-${streams.length}`,
        model_name: query.get('model'),
      }),
    );
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString('utf8')) as { type: string; text?: string };
      if (m.type === 'Speak') {
        pending += m.text ?? '';
        stream.texts.push(m.text ?? '');
      } else if (m.type === 'Flush') {
        const text = pending.trim();
        pending = '';
        const id = sequence++;
        work = work.then(async () => {
          if (text !== '') {
            const pcm = Buffer.from((await speakAsync(text, rate)).buffer);
            // 100 ms chunks, as the service streams them
            const chunk = (rate / 10) * 2;
            for (let at = 0; at < pcm.length; at += chunk) {
              if (ws.readyState === ws.OPEN) ws.send(pcm.subarray(at, at + chunk));
            }
          }
          if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'Flushed', sequence_id: id }));
        });
      } else if (m.type === 'Close') {
        work = work.then(() => ws.close(1000));
      }
    });
  });
  const port = await listenOnLoopback(server);
  return {
    baseURL: `http://127.0.0.1:${port}`,
    streams,
    close: () => closeSocketServer(server, wss),
  };
}
