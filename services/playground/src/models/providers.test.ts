import { initializeLogger, llm, stt, tts } from '@livekit/agents';
import type { LlmConfig, TtsConfig } from '@vab/flow';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiStub } from '../../test/openai-stub.js';
import { createEgressFetch } from '../egress/client.js';
import { EgressPolicy, parseAllowList } from '../egress/policy.js';
import { AudioFrame } from '@livekit/rtc-node';
import { startDeepgramSpeakStub, startElevenLabsStub } from '@vab/testkit';
import { joinFrames, pcmFrames, pluginBaseURL, PROVIDERS, ttsOptions, type Modality } from './providers.js';

initializeLogger({ pretty: false, level: 'error' });
const log = pino({ level: 'silent' });

/** What the flow format (docs/api.md) names for each role. */
const NAMED: [string, Modality][] = [
  ['openai', 'llm'],
  ['anthropic', 'llm'],
  ['google', 'llm'],
  ['groq', 'llm'],
  ['elevenlabs', 'tts'],
  ['cartesia', 'tts'],
  ['openai', 'tts'],
  ['deepgram', 'tts'],
  ['deepgram', 'stt'],
  ['openai', 'stt'],
];

const BASE = { nodeId: 'n' };

describe("an utterance's frames", () => {
  it('join in order into one frame of their format', () => {
    const a = new AudioFrame(Int16Array.from([1, 2, 3]), 16000, 1, 3);
    const b = new AudioFrame(Int16Array.from([4, 5]), 16000, 1, 2);
    const joined = joinFrames([a, b]);
    expect([...joined.data]).toEqual([1, 2, 3, 4, 5]);
    expect([joined.sampleRate, joined.channels, joined.samplesPerChannel]).toEqual([16000, 1, 5]);
    expect(joinFrames([a])).toBe(a);
    expect(() => joinFrames([a, new AudioFrame(Int16Array.from([1]), 24000, 1, 1)])).toThrow(/formats/);
  });
});

describe("OpenAI's speech", () => {
  it('is cut into 100 ms frames at 24 kHz, in order, the last one shorter', () => {
    const samples = Int16Array.from({ length: 6000 }, (_, i) => i);
    const body = new ArrayBuffer(samples.byteLength + 1); // and an odd byte, dropped
    new Int16Array(body, 0, samples.length).set(samples);
    const frames = pcmFrames(body);
    expect(frames.map((f) => f.samplesPerChannel)).toEqual([2400, 2400, 1200]);
    expect(frames.every((f) => f.sampleRate === 24000 && f.channels === 1)).toBe(true);
    expect(frames.flatMap((f) => [...f.data])).toEqual([...samples]);
  });
});

describe('the provider table', () => {
  it.each(NAMED)('%s as %s runs here, or says why not', (id, modality) => {
    const spec = PROVIDERS[id]!;
    const endpoint = { apiKey: 'k' };
    if (!spec[modality]) {
      expect(spec.unsupported?.[modality]).toMatch(/.{20,}/);
      return;
    }
    const made =
      modality === 'llm'
        ? spec.llm!({ ...BASE, provider: id }, endpoint)
        : modality === 'tts'
          ? spec.tts!({ ...BASE, provider: id, extras: {} }, endpoint)
          : spec.stt!({ ...BASE, provider: id, mode: 'file' }, 'en', endpoint);
    expect(made).toBeInstanceOf({ llm: llm.LLM, tts: tts.TTS, stt: stt.STT }[modality]);
  });

  it('names each provider key variable once, and its own endpoint', () => {
    const vars = Object.values(PROVIDERS).flatMap((p) => p.envVars);
    expect(new Set(vars).size).toBe(vars.length);
    for (const p of Object.values(PROVIDERS)) expect(new URL(p.defaultBaseURL).protocol).toBe('https:');
  });
});

describe('model parameters reach the model', () => {
  let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
  beforeAll(async () => {
    stub = await startOpenAiStub(() => ({ content: 'fine' }));
  });
  afterAll(() => stub.close());

  it.each(['openai', 'anthropic', 'groq'])('%s: model, temperature and maxTokens', async (id) => {
    const fetch = createEgressFetch({
      policy: new EgressPolicy(parseAllowList('127.0.0.1')),
      timeoutMs: 5000,
      maxResponseBytes: 1 << 20,
      log,
    });
    const cfg: LlmConfig = { ...BASE, provider: id, model: 'm-1', temperature: 0.25, maxTokens: 123 };
    const model = PROVIDERS[id]!.llm!(cfg, {
      apiKey: `key-${id}`,
      flowBaseURL: { url: stub.baseURL, fetch, timeoutMs: 5000 },
    });
    const chatCtx = llm.ChatContext.empty();
    chatCtx.addMessage({ role: 'user', content: 'hello' });
    let text = '';
    for await (const chunk of model.chat({ chatCtx })) text += chunk.delta?.content ?? '';
    expect(text).toBe('fine');
    expect(stub.requests.at(-1)).toMatchObject({
      model: 'm-1',
      temperature: 0.25,
      max_completion_tokens: 123,
    });
    expect(stub.authorizations.at(-1)).toBe(`Bearer key-${id}`);
  });
});

describe('TTS provider extras', () => {
  const node = (provider: string, extras: Record<string, unknown>): TtsConfig => ({
    ...BASE,
    provider,
    model: 'tts-model',
    voiceId: 'v-9',
    extras,
  });

  it('elevenlabs: voice settings, language and latency (flat params, either spelling)', () => {
    expect(
      ttsOptions.elevenlabs(
        node('elevenlabs', {
          stability: 0.3,
          similarity_boost: 0.9,
          style: '0.2',
          languageCode: 'de',
          streamingLatency: 2,
        }),
        { apiKey: 'k' },
      ),
    ).toEqual({
      apiKey: 'k',
      voiceId: 'v-9',
      model: 'tts-model',
      languageCode: 'de',
      streamingLatency: 2,
      voiceSettings: { stability: 0.3, similarity_boost: 0.9, style: 0.2 },
    });
    // the other spelling, with the defaults the API needs filled in
    expect(
      ttsOptions.elevenlabs(node('elevenlabs', { similarityBoost: 0.6 }), { apiKey: 'k' }).voiceSettings,
    ).toEqual({
      stability: 0.5,
      similarity_boost: 0.6,
    });
    // none tuned: the voice's own settings stand; out-of-range and unknown extras are left out
    expect(
      ttsOptions.elevenlabs(node('elevenlabs', { stability: 7, colour: 'blue' }), { apiKey: 'k' }),
    ).toEqual({
      apiKey: 'k',
      voiceId: 'v-9',
      model: 'tts-model',
    });
  });

  it("elevenlabs: a voice id stays one segment of the plugin's URL path", () => {
    const traversal = { ...node('elevenlabs', {}), voiceId: '../../admin?x=' };
    expect(ttsOptions.elevenlabs(traversal, { apiKey: 'k' }).voiceId).toBe('..%2F..%2Fadmin%3Fx%3D');
  });

  it('openai: speed and instructions; deepgram: speed', () => {
    const { client, ...openAiOptions } = ttsOptions.openai(
      node('openai', { speed: 1.5, instructions: 'Warmly.' }),
      { apiKey: 'k' },
    );
    // the key rule's key, on a client of ours (never the plugin's own, which would read the environment)
    expect(client?.apiKey).toBe('k');
    expect(client?.baseURL).toBe('https://api.openai.com/v1');
    expect(openAiOptions).toEqual({
      apiKey: 'k',
      model: 'tts-model',
      voice: 'v-9',
      speed: 1.5,
      instructions: 'Warmly.',
    });
    expect(ttsOptions.deepgram(node('deepgram', { speed: '0.8', pitch: 3 }), { apiKey: 'k' })).toEqual({
      apiKey: 'k',
      model: 'tts-model',
      speed: 0.8,
    });
    // outside the range its plugin accepts (which would throw, failing the session): left out
    const slow = ttsOptions.deepgram(node('deepgram', { speed: 0.5 }), { apiKey: 'k' });
    expect(slow).toEqual({ apiKey: 'k', model: 'tts-model' });
    expect(() => PROVIDERS.deepgram!.tts!(node('deepgram', { speed: 0.5 }), { apiKey: 'k' })).not.toThrow();
  });
});

describe('a TTS whose plugin connects by itself, at a flow address', () => {
  const egress = {
    fetch: createEgressFetch({
      policy: new EgressPolicy(parseAllowList('127.0.0.1')),
      timeoutMs: 5000,
      maxResponseBytes: 1 << 20,
      log,
    }),
    timeoutMs: 5000,
  };
  const loudest = (frames: AudioFrame[]) => Math.max(0, ...frames.flatMap((f) => [...f.data].map(Math.abs)));

  it('is given the origin and path only, without trailing slashes', () => {
    expect(pluginBaseURL('http://10.0.0.5:8080/v1/?x=1#y')).toBe('http://10.0.0.5:8080/v1');
    expect(pluginBaseURL('https://[::1]/', 'ws')).toBe('wss://[::1]');
  });

  // the simulated caller's voice asks for one-shot synthesis: over the plugin's WebSocket too, never its HTTP
  // path (ElevenLabs': a fetch that follows redirects; Deepgram's: https on port 443 whatever the URL says)
  it('elevenlabs: one-shot synthesis speaks over its WebSocket, with the key it was given', async () => {
    const stub = await startElevenLabsStub();
    try {
      const model = PROVIDERS.elevenlabs!.tts!(
        { ...BASE, provider: 'elevenlabs', voiceId: 'v-9', extras: {} },
        { apiKey: 'el-key', flowBaseURL: { url: `${stub.baseURL}/`, ...egress } },
      );
      const frames: AudioFrame[] = [];
      for await (const audio of model.synthesize('Hello there.')) frames.push(audio.frame);
      await model.close();
      expect(loudest(frames)).toBeGreaterThan(1000);
      expect(frames[0]!.sampleRate).toBe(22050);
      expect(stub.sockets).toMatchObject([
        { path: '/v1/text-to-speech/v-9/multi-stream-input', apiKey: 'el-key' },
      ]);
      expect([...stub.sockets[0]!.contexts.values()].flat().join(' ')).toBe('Hello there.');
    } finally {
      await stub.close();
    }
  });

  it('deepgram: one-shot synthesis speaks over its WebSocket, with the key it was given', async () => {
    const stub = await startDeepgramSpeakStub();
    try {
      const model = PROVIDERS.deepgram!.tts!(
        { ...BASE, provider: 'deepgram', extras: {} },
        { apiKey: 'dg-key', flowBaseURL: { url: stub.baseURL, ...egress } },
      );
      const frames: AudioFrame[] = [];
      for await (const audio of model.synthesize('Hello there.')) frames.push(audio.frame);
      await model.close();
      expect(loudest(frames)).toBeGreaterThan(1000);
      expect(stub.streams).toMatchObject([{ authorization: 'Token dg-key' }]);
      expect(stub.streams[0]!.query.get('encoding')).toBe('linear16');
    } finally {
      await stub.close();
    }
  });
});
