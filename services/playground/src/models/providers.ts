import {
  APIConnectionError,
  APIError,
  APIStatusError,
  APITimeoutError,
  shortuuid,
  tts,
  type APIConnectOptions,
  type llm,
  type stt,
} from '@livekit/agents';
import * as deepgram from '@livekit/agents-plugin-deepgram';
import * as elevenlabs from '@livekit/agents-plugin-elevenlabs';
import * as google from '@livekit/agents-plugin-google';
import * as openai from '@livekit/agents-plugin-openai';
import type { LlmConfig, SttConfig, TtsConfig } from '@vab/flow';
import { AudioFrame } from '@livekit/rtc-node';
import { OpenAI } from 'openai';
import { z } from 'zod';
import { overBoundMessage, type EgressFetch } from '../egress/client.js';

export type Modality = 'llm' | 'tts' | 'stt';

/** Where a model's requests go, and with which key. */
export interface Endpoint {
  apiKey: string;
  /** A base URL the flow named, reached through the egress-checked client; absent: the provider's own. */
  flowBaseURL?: { url: string; fetch: EgressFetch; timeoutMs: number } | undefined;
}

export interface ProviderSpec {
  /** The variables that hold the server's key, in order of preference. */
  envVars: readonly string[];
  /** The provider's own endpoint (the plugin's default): the only place the server's key is ever sent. */
  defaultBaseURL: string;
  /**
   * The modalities a flow may point at another endpoint with `baseURL` (an OpenAI-compatible one): only where
   * the provider's client takes our egress-checked fetch, so the one connect-time check applies.
   */
  customBaseURL: readonly Modality[];
  /**
   * The modalities whose plugin opens its connections itself (a WebSocket of its own): a flow may point them
   * elsewhere only at an address written in the URL, which the URL policy checks before the start and which
   * no resolver can change by the time of the connect (a name could not be checked then). Only where that
   * WebSocket is the one connection the model makes (`ws` follows no redirect): see `addressed`.
   */
  literalBaseURL?: readonly Modality[];
  llm?: (cfg: LlmConfig, endpoint: Endpoint) => llm.LLM;
  tts?: (cfg: TtsConfig, endpoint: Endpoint) => tts.TTS;
  stt?: (cfg: SttConfig, language: string, endpoint: Endpoint) => stt.STT;
  /** Its chat API takes a `seed` (sampling made repeatable, as far as the provider makes it). */
  seed?: boolean;
  /** Why a modality the flow format names for this provider cannot run here. */
  unsupported?: Partial<Record<Modality, string>>;
}

/**
 * An OpenAI-compatible chat model. The client is built here, never by the plugin, so the key is always the
 * one the key rule chose (the plugins otherwise fall back to `process.env` themselves) and a flow's own base
 * URL is only reached through the egress-checked fetch.
 */
const openAiCompatible =
  (defaultModel: string, defaultBaseURL: string) =>
  (cfg: LlmConfig, endpoint: Endpoint): llm.LLM =>
    new FixedKwargsLLM({
      kwargs: {
        ...(cfg.temperature === 0 ? { temperature: 0 } : {}),
        ...(cfg.seed !== undefined ? { seed: cfg.seed } : {}),
      },
      model: cfg.model ?? defaultModel,
      temperature: cfg.temperature,
      maxCompletionTokens: cfg.maxTokens,
      client: openAiClient(endpoint, defaultBaseURL),
    });

/** An OpenAI client for one endpoint: a flow's own base URL only through the egress-checked fetch. */
function openAiClient(endpoint: Endpoint, defaultBaseURL: string): OpenAI {
  return new OpenAI({
    apiKey: endpoint.apiKey,
    baseURL: endpoint.flowBaseURL?.url ?? defaultBaseURL,
    maxRetries: 0,
    ...(endpoint.flowBaseURL
      ? { fetch: endpoint.flowBaseURL.fetch, timeout: endpoint.flowBaseURL.timeoutMs }
      : {}),
  });
}

const OPENAI_BASE_URL = 'https://api.openai.com/v1';

/**
 * OpenAI speech-to-text. `file` (the default): each utterance the VAD cuts is posted to /audio/transcriptions
 * (whisper-1), which every OpenAI-compatible server speaks and which goes through our fetch; `realtime`: the
 * Realtime API's WebSocket, which the plugin opens itself, so only at OpenAI's own URL (readiness refuses a
 * flow URL with it).
 */
function openAiStt(cfg: SttConfig, language: string, endpoint: Endpoint): stt.STT {
  const realtime = cfg.mode === 'realtime';
  return new UtteranceSTT({
    language,
    useRealtime: realtime,
    // checked by the constructor even when the client (which carries it) is ours
    apiKey: endpoint.apiKey,
    ...(cfg.model ? { model: cfg.model } : {}),
    ...(realtime ? {} : { client: openAiClient(endpoint, OPENAI_BASE_URL) }),
  });
}

/**
 * OpenAI's STT with an utterance's frames joined in one copy. LiveKit 1.9's `mergeFrames` joins them through
 * array spreads (`new Int16Array([...data, ...frame.data])`): ~50,000 samples for a 3 s utterance held the
 * playground's event loop for milliseconds per turn, the worst of its delays at 50 sessions. A single frame
 * goes through untouched.
 */
class UtteranceSTT extends openai.STT {
  override async _recognize(
    buffer: AudioFrame | AudioFrame[],
    abortSignal?: AbortSignal,
  ): ReturnType<openai.STT['_recognize']> {
    try {
      return await super._recognize(Array.isArray(buffer) ? joinFrames(buffer) : buffer, abortSignal);
    } catch (error) {
      if (abortSignal?.aborted) throw error;
      // LiveKit's adapter of a batch STT only logs a failed recognition: the session would never hear of
      // it, and the caller would get no answer and no reason. Reported as LiveKit reports a model's failure;
      // recoverable, since the next utterance is a request of its own
      const failure = livekitErrorOf(error);
      this.emit('error', {
        type: 'stt_error',
        timestamp: Date.now(),
        label: this.label,
        error: failure,
        recoverable: true,
      });
      throw failure;
    }
  }
}

/**
 * A failure of the OpenAI client as LiveKit's own API errors, as its plugin's LLM converts them (its TTS and
 * STT pass the client's errors on as they are, which a turn's failure could only read as `failed`, a refused
 * connection included): an answer over the byte bound keeps its message (it says so), a status stays a
 * status, a timeout a timeout, a failed connection (refused by the egress policy, reset, no such host: the
 * OpenAI client's connection error, or undici's TypeError for a body cut off) a connection error. Not
 * retried: the request failed as a whole.
 */
function livekitErrorOf(error: unknown): APIError {
  if (error instanceof APIError) return error;
  const options = { retryable: false };
  const overBound = overBoundMessage(error);
  if (overBound) return new APIError(overBound, options);
  if (error instanceof OpenAI.APIConnectionTimeoutError) return new APITimeoutError({ options });
  if (error instanceof OpenAI.APIError && error.status !== undefined)
    return new APIStatusError({
      message: error.message,
      options: { ...options, statusCode: error.status, requestId: error.requestID ?? null },
    });
  if (error instanceof OpenAI.APIConnectionError || bodyCutOff(error))
    return new APIConnectionError({ message: 'connection error', options });
  return new APIError(error instanceof Error ? error.message : String(error), options);
}

/** undici's fetch failing (`fetch failed`), or its body cut off mid-way (`terminated`): TypeErrors both. */
const bodyCutOff = (error: unknown) =>
  error instanceof TypeError && (error.message === 'terminated' || error.message === 'fetch failed');

/**
 * LiveKit 1.9 starts a `ChunkedStream`'s main task without awaiting it (`dist/tts/tts.js`): a failed request,
 * once reported to the session as its TTS's `error` event, is rethrown into nothing — an unhandled rejection,
 * which ends the process (Node's default), unless its stack shows LiveKit's frames (the playground's
 * `surviveLiveKitRejections`). An error made in a socket's callback shows none: undici's, when a flow's TTS
 * answered over the byte bound, ended the process and every session on it. The main task of our own streams
 * ends there instead: what failed has been reported.
 */
function settlesAfterReport(stream: abstract new (...args: never[]) => tts.ChunkedStream): void {
  const base = (tts.ChunkedStream.prototype as unknown as { mainTask?: unknown }).mainTask;
  if (typeof base !== 'function') throw new Error("LiveKit's ChunkedStream has no mainTask to settle");
  Object.defineProperty(stream.prototype, 'mainTask', {
    value: async function mainTask(this: tts.ChunkedStream): Promise<void> {
      await (base as () => Promise<void>).call(this).catch(() => undefined);
    },
  });
}

/** Frames of one rate and channel count as one frame. */
export function joinFrames(frames: AudioFrame[]): AudioFrame {
  const first = frames[0];
  if (!first) throw new TypeError('no audio to join');
  if (frames.length === 1) return first;
  let samples = 0;
  for (const f of frames) {
    if (f.sampleRate !== first.sampleRate || f.channels !== first.channels) {
      throw new TypeError('frames of different formats');
    }
    samples += f.samplesPerChannel;
  }
  const data = new Int16Array(samples * first.channels);
  let at = 0;
  for (const f of frames) {
    data.set(f.data.subarray(0, f.samplesPerChannel * f.channels), at);
    at += f.samplesPerChannel * f.channels;
  }
  return new AudioFrame(data, first.sampleRate, first.channels, samples);
}

/** The OpenAI plugin's own defaults (1.9.0), for the request this class makes itself. */
const OPENAI_TTS_DEFAULTS = { model: 'tts-1', voice: 'alloy', speed: 1 } as const;
/** OpenAI's PCM speech: 24 kHz mono, cut into 100 ms frames as the plugin cuts it. */
const OPENAI_TTS_RATE = 24000;
const OPENAI_TTS_FRAME_SAMPLES = OPENAI_TTS_RATE / 10;

/**
 * OpenAI's TTS with its answer cut into frames in place. The plugin (1.9.0) cuts a whole sentence's PCM with
 * LiveKit's `AudioByteStream`, which copies it through an array spread: 4–30 ms of the event loop for 1–6 s of
 * speech, measured here, in every reply of every session. The request is the plugin's (same fields, same
 * client, so the same egress check).
 */
class PcmTTS extends openai.TTS {
  private opts: Partial<openai.TTSOptions> & { client: OpenAI };
  /** The plugin's own is private: `close()` aborts both. */
  private readonly aborts = new AbortController();

  constructor(opts: Partial<openai.TTSOptions> & { client: OpenAI }) {
    super(opts);
    this.opts = opts;
  }

  override updateOptions(opts: Parameters<openai.TTS['updateOptions']>[0]): void {
    super.updateOptions(opts);
    this.opts = { ...this.opts, ...opts };
  }

  override synthesize(
    text: string,
    connOptions?: APIConnectOptions,
    abortSignal?: AbortSignal,
  ): openai.ChunkedStream {
    const signal = abortSignal ? AbortSignal.any([abortSignal, this.aborts.signal]) : this.aborts.signal;
    const o = { ...OPENAI_TTS_DEFAULTS, ...this.opts };
    const speech = this.opts.client.audio.speech.create(
      {
        input: text,
        model: o.model,
        voice: o.voice,
        ...(o.instructions ? { instructions: o.instructions } : {}),
        response_format: 'pcm',
        speed: o.speed,
      },
      { signal },
    );
    return new PcmChunkedStream(this, text, speech, connOptions, signal);
  }

  override async close(): Promise<void> {
    this.aborts.abort();
    await super.close();
  }
}

class PcmChunkedStream extends openai.ChunkedStream {
  constructor(
    owner: openai.TTS,
    text: string,
    private readonly speech: Promise<Response>,
    connOptions?: APIConnectOptions,
    abortSignal?: AbortSignal,
  ) {
    super(owner, text, speech, connOptions, abortSignal);
  }

  protected override async run(): Promise<void> {
    try {
      const pcm = pcmFrames(await (await this.speech).arrayBuffer());
      const requestId = shortuuid();
      pcm.forEach((frame, i) =>
        this.queue.put({ requestId, segmentId: requestId, frame, final: i === pcm.length - 1 }),
      );
    } catch (error) {
      if (this.abortSignal.aborted || (error instanceof Error && error.name === 'AbortError')) return;
      throw livekitErrorOf(error);
    } finally {
      this.queue.close();
    }
  }
}
settlesAfterReport(PcmChunkedStream);

/** 16-bit mono PCM at OpenAI's rate as 100 ms frames (the last one shorter); an odd last byte is dropped. */
export function pcmFrames(body: ArrayBuffer): AudioFrame[] {
  const samples = new Int16Array(body, 0, Math.floor(body.byteLength / 2));
  const frames: AudioFrame[] = [];
  for (let at = 0; at < samples.length; at += OPENAI_TTS_FRAME_SAMPLES) {
    const data = samples.slice(at, at + OPENAI_TTS_FRAME_SAMPLES);
    frames.push(new AudioFrame(data, OPENAI_TTS_RATE, 1, data.length));
  }
  return frames;
}

/**
 * The OpenAI plugin (1.9.0) sends `temperature` only when it is truthy, so a flow's `temperature: 0` — the
 * most repeatable setting, which regression test cases ask for — would reach the model as its default (1);
 * and it has no `seed` option. The plugin's own per-request `extraKwargs` carries both instead.
 */
class FixedKwargsLLM extends openai.LLM {
  private readonly kwargs: Record<string, unknown>;
  constructor({ kwargs, ...opts }: Partial<openai.LLMOptions> & { kwargs?: Record<string, unknown> }) {
    super(opts);
    this.kwargs = kwargs ?? {};
  }
  override chat(opts: Parameters<openai.LLM['chat']>[0]): ReturnType<openai.LLM['chat']> {
    return super.chat({ ...opts, extraKwargs: { ...this.kwargs, ...opts.extraKwargs } });
  }
}

/**
 * A flow's base URL as a plugin that connects by itself is given it: the origin and path only (the plugins
 * glue their own paths and queries onto the text, so nothing but the URL's origin may stand before them),
 * without trailing slashes; `ws` for a plugin that takes its WebSocket URL as it is.
 */
export function pluginBaseURL(url: string, scheme: 'http' | 'ws' = 'http'): string {
  const u = new URL(url);
  const base = `${u.origin}${u.pathname}`.replace(/\/+$/, '');
  return scheme === 'ws' ? base.replace(/^http/, 'ws') : base;
}

/**
 * A streaming TTS at a flow's address whose one-shot `synthesize` (the simulated caller's voice calls it)
 * goes over the plugin's own stream too. Their one-shot paths cannot run under the address rule: ElevenLabs'
 * posts with the global fetch, which follows redirects (a 30x from the address could send it anywhere);
 * Deepgram's posts over https to port 443 of the host whatever the URL says. Their WebSockets (`ws`, which
 * follows no redirect) connect to the address written in the URL and nowhere else.
 */
function addressed(model: tts.TTS): tts.TTS {
  // on the instance: the plugins' classes declare their own one-shot stream types as its result
  model.synthesize = (text, connOptions, abortSignal) =>
    new StreamedChunkedStream(model, text, connOptions, abortSignal);
  return model;
}

/** One text synthesized over the TTS's stream: its frames, in order, as a one-shot synthesis gives them. */
class StreamedChunkedStream extends tts.ChunkedStream {
  label = 'vab.StreamedChunkedStream';
  constructor(
    private readonly model: tts.TTS,
    text: string,
    private readonly connOptions: APIConnectOptions | undefined,
    abortSignal?: AbortSignal,
  ) {
    super(text, model, connOptions, abortSignal);
  }

  protected override async run(): Promise<void> {
    const stream = this.model.stream(this.connOptions ? { connOptions: this.connOptions } : undefined);
    const stop = () => stream.close();
    this.abortSignal.addEventListener('abort', stop, { once: true });
    try {
      stream.pushText(this.inputText);
      stream.endInput();
      for await (const audio of stream) {
        if (audio !== tts.SynthesizeStream.END_OF_STREAM) this.queue.put(audio);
      }
    } finally {
      this.abortSignal.removeEventListener('abort', stop);
      stream.close();
    }
  }
}
settlesAfterReport(StreamedChunkedStream);

/** Provider extras (flat node params beyond the flow format's own) each TTS plugin understands. */
const lenient = <T extends z.ZodType>(schema: T) => schema.optional().catch(undefined);
const unit = lenient(z.coerce.number().min(0).max(1));
const speed = lenient(z.coerce.number().min(0.25).max(4));
const ElevenLabsExtras = z.object({
  stability: unit,
  similarityBoost: unit,
  similarity_boost: unit,
  style: unit,
  useSpeakerBoost: lenient(z.boolean()),
  speed,
  languageCode: lenient(z.string().max(35)),
  streamingLatency: lenient(z.coerce.number().int().min(0).max(4)),
});
const OpenAiTtsExtras = z.object({ speed, instructions: lenient(z.string().max(4000)) });
// the Deepgram plugin's constructor throws outside 0.7–1.5 (Aura's range)
const DeepgramTtsExtras = z.object({ speed: lenient(z.coerce.number().min(0.7).max(1.5)) });

const ELEVENLABS_VOICE_DEFAULTS = { stability: 0.5, similarity_boost: 0.75 };

/**
 * The options each TTS plugin is built with: the node's model and voice, and the provider extras it
 * understands (an extra it does not, or out of range, is left out rather than failing the session).
 */
export const ttsOptions = {
  openai: (cfg: TtsConfig, endpoint: Endpoint): Partial<openai.TTSOptions> & { client: OpenAI } => {
    const x = OpenAiTtsExtras.parse(cfg.extras);
    return {
      apiKey: endpoint.apiKey,
      client: openAiClient(endpoint, OPENAI_BASE_URL),
      ...(cfg.model ? { model: cfg.model } : {}),
      ...(cfg.voiceId ? { voice: cfg.voiceId as openai.TTSOptions['voice'] } : {}),
      ...(x.speed !== undefined ? { speed: x.speed } : {}),
      ...(x.instructions ? { instructions: x.instructions } : {}),
    };
  },
  deepgram: (cfg: TtsConfig, { apiKey, flowBaseURL }: Endpoint): Partial<deepgram.TTSOptions> => {
    const x = DeepgramTtsExtras.parse(cfg.extras);
    return {
      apiKey,
      // the plugin appends /v1/speak (over ws(s) for its stream)
      ...(flowBaseURL ? { baseUrl: pluginBaseURL(flowBaseURL.url) } : {}),
      ...(cfg.model ? { model: cfg.model } : {}),
      ...(x.speed !== undefined ? { speed: x.speed } : {}),
    };
  },
  elevenlabs: (cfg: TtsConfig, { apiKey, flowBaseURL }: Endpoint): elevenlabs.TTSOptions => {
    const x = ElevenLabsExtras.parse(cfg.extras);
    const similarity = x.similarityBoost ?? x.similarity_boost;
    const tuned = [x.stability, similarity, x.style, x.speed, x.useSpeakerBoost].some((v) => v !== undefined);
    return {
      apiKey,
      // the plugin appends /text-to-speech/{voice}/multi-stream-input (over ws(s)), as to its own …/v1
      ...(flowBaseURL ? { baseURL: pluginBaseURL(flowBaseURL.url) } : {}),
      // the plugin puts it into its URL's path as it is: encoded, a flow's `../` cannot leave the voice's path
      // (a trusted baseURL gets the server's key); ElevenLabs' ids are letters and digits, unchanged by it
      ...(cfg.voiceId ? { voiceId: encodeURIComponent(cfg.voiceId) } : {}),
      ...(cfg.model ? { model: cfg.model } : {}),
      ...(x.languageCode ? { languageCode: x.languageCode } : {}),
      ...(x.streamingLatency !== undefined ? { streamingLatency: x.streamingLatency } : {}),
      ...(tuned
        ? {
            voiceSettings: {
              stability: x.stability ?? ELEVENLABS_VOICE_DEFAULTS.stability,
              similarity_boost: similarity ?? ELEVENLABS_VOICE_DEFAULTS.similarity_boost,
              ...(x.style !== undefined ? { style: x.style } : {}),
              ...(x.speed !== undefined ? { speed: x.speed } : {}),
              ...(x.useSpeakerBoost !== undefined ? { use_speaker_boost: x.useSpeakerBoost } : {}),
            },
          }
        : {}),
    };
  },
};

/**
 * Every provider the flow format names (docs/api.md › Flows at run time), what it runs here, and where its key
 * comes from and may go. The one table behind the key status, the key rule, the readiness check and the
 * runtime.
 */
export const PROVIDERS: Readonly<Record<string, ProviderSpec>> = {
  openai: {
    envVars: ['OPENAI_API_KEY'],
    defaultBaseURL: OPENAI_BASE_URL,
    customBaseURL: ['llm', 'tts', 'stt'],
    llm: openAiCompatible('gpt-4o-mini', OPENAI_BASE_URL),
    seed: true,
    tts: (cfg, endpoint) => new PcmTTS(ttsOptions.openai(cfg, endpoint)),
    stt: openAiStt,
  },
  // Anthropic has no LiveKit Node plugin; its API speaks the OpenAI chat-completions protocol.
  anthropic: {
    envVars: ['ANTHROPIC_API_KEY'],
    defaultBaseURL: 'https://api.anthropic.com/v1/',
    customBaseURL: ['llm'],
    llm: openAiCompatible('claude-sonnet-4-5', 'https://api.anthropic.com/v1/'),
  },
  groq: {
    envVars: ['GROQ_API_KEY'],
    defaultBaseURL: 'https://api.groq.com/openai/v1',
    customBaseURL: ['llm'],
    llm: openAiCompatible('llama-3.3-70b-versatile', 'https://api.groq.com/openai/v1'),
    seed: true,
  },
  google: {
    envVars: ['GOOGLE_API_KEY'],
    defaultBaseURL: 'https://generativelanguage.googleapis.com',
    // the Gemini client takes no fetch of ours, so a flow cannot point it elsewhere through the egress check
    customBaseURL: [],
    llm: (cfg, { apiKey }) =>
      new google.LLM({
        apiKey,
        vertexai: false,
        model: cfg.model ?? 'gemini-2.0-flash-001',
        temperature: cfg.temperature,
        maxOutputTokens: cfg.maxTokens,
      }),
  },
  deepgram: {
    envVars: ['DEEPGRAM_API_KEY'],
    defaultBaseURL: 'https://api.deepgram.com',
    customBaseURL: [],
    // its plugin opens its WebSockets itself
    literalBaseURL: ['stt', 'tts'],
    tts: (cfg, endpoint) => {
      const model = new deepgram.TTS(ttsOptions.deepgram(cfg, endpoint));
      return endpoint.flowBaseURL ? addressed(model) : model;
    },
    stt: (cfg, language, { apiKey, flowBaseURL }) =>
      new deepgram.STT({
        apiKey,
        language,
        ...(cfg.model ? { model: cfg.model } : {}),
        ...(cfg.keyterms ? { keyterm: cfg.keyterms } : {}),
        // the plugin appends /v1/listen, over ws(s)
        ...(flowBaseURL ? { baseUrl: pluginBaseURL(flowBaseURL.url, 'ws') } : {}),
      }),
  },
  elevenlabs: {
    // the plugin reads ELEVEN_API_KEY; many .env files say ELEVENLABS_API_KEY
    envVars: ['ELEVEN_API_KEY', 'ELEVENLABS_API_KEY'],
    defaultBaseURL: 'https://api.elevenlabs.io/v1',
    customBaseURL: [],
    // its plugin opens its WebSocket itself
    literalBaseURL: ['tts'],
    tts: (cfg, endpoint) => {
      const model = new elevenlabs.TTS(ttsOptions.elevenlabs(cfg, endpoint));
      return endpoint.flowBaseURL ? addressed(model) : model;
    },
  },
  cartesia: {
    envVars: ['CARTESIA_API_KEY'],
    defaultBaseURL: 'https://api.cartesia.ai',
    customBaseURL: [],
    unsupported: {
      tts:
        'no release of @livekit/agents-plugin-cartesia runs on @livekit/agents 1.9.0 (its newest, 1.8.1, ' +
        'requires exactly 1.8.1, and two versions of the framework cannot share one process)',
    },
  },
};

/** What a provider id names, if this server knows it. */
export const providerSpec = (id: string): ProviderSpec | undefined =>
  Object.hasOwn(PROVIDERS, id) ? PROVIDERS[id] : undefined;

/** The providers that run `modality` here, for messages. */
export const providersFor = (modality: Modality): string[] =>
  Object.entries(PROVIDERS)
    .filter(([, p]) => p[modality])
    .map(([id]) => id);

/** Every variable that holds a provider key, in the table's order (the LiveKit ones apart). */
export const PROVIDER_ENV_VARS: readonly string[] = Object.values(PROVIDERS).flatMap((p) => p.envVars);
