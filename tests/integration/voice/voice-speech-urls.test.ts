import type { Flow } from '@vab/contracts';
import { loadConfig } from '@vab/playground';
import {
  speak,
  startDeepgramSpeakStub,
  startElevenLabsStub,
  startOpenAiStub,
  startSpeechStub,
  VoiceClient,
  voiceFlow,
} from '@vab/testkit';
import type { OpenAiStub, SpeechStub } from '@vab/testkit';
import { lookup } from 'node:dns/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/**
 * ElevenLabs and Deepgram TTS at a flow's own address, through the gateway's voice WebSocket: their plugins
 * open their WebSockets themselves, so a flow may point them only at an address written in the URL (checked by
 * the URL policy before the start), and the server's key goes there only when the operator trusts the URL.
 * Stubs speak each provider's wire protocol with espeak-ng speech.
 */

const KEY = 'sk-voice-test-key-0123456789';
const SERVER_ELEVEN = 'eleven-server-key-of-the-operator';
const SERVER_DEEPGRAM = 'deepgram-server-key-of-the-operator';
const GREETING = 'Hello, how can I help?';

let stack: Stack;
let http: ReturnType<typeof api>;
let chat: OpenAiStub;
let speech: SpeechStub;
let eleven: Awaited<ReturnType<typeof startElevenLabsStub>>;
let deepgram: Awaited<ReturnType<typeof startDeepgramSpeakStub>>;
/** An OpenAI-compatible speech server that refuses every key: a 401 naming the key it was sent. */
let refusing: SpeechStub;

/** A name the egress policy refuses when connecting: it resolves inside (any other, as the system has it). */
const INSIDE = 'speech.inside.test';

beforeAll(async () => {
  [chat, speech, eleven, deepgram, refusing] = await Promise.all([
    startOpenAiStub(() => ({ content: 'ok' })),
    startSpeechStub({ transcribe: () => '' }),
    startElevenLabsStub(),
    startDeepgramSpeakStub(),
    startSpeechStub({
      transcribe: () => '',
      fail: (_route, authorization) => ({ status: 401, message: `invalid key ${authorization ?? ''}` }),
    }),
  ]);
  stack = await startStack({
    resolve: async (host) =>
      host === INSIDE ? [{ address: '10.0.0.5', family: 4 }] : lookup(host, { all: true, verbatim: true }),
    // the operator has both keys, and trusts the Deepgram server with its key; not the ElevenLabs one
    providerEnv: { ELEVEN_API_KEY: SERVER_ELEVEN, DEEPGRAM_API_KEY: SERVER_DEEPGRAM },
    playground: {
      TRUSTED_MODEL_URLS: loadConfig({ TRUSTED_MODEL_URLS: deepgram.baseURL }).TRUSTED_MODEL_URLS,
    },
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack?.close();
  await Promise.all([chat?.close(), speech?.close(), eleven?.close(), deepgram?.close(), refusing?.close()]);
});

/** The clinic's voice flow with its TTS node replaced. */
function withTts(tts: Record<string, unknown>): Flow {
  const flow = voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
  flow.nodes = flow.nodes.map((n) => (n.id === 'tts' ? { id: 'tts', nodeType: 'tts', ...tts } : n));
  return flow;
}

/** Starts a voice session of `flow` (the request sends the OpenAI key only) and waits for its greeting to play. */
async function greetingOf(flow: Flow) {
  const v = await http.post('/api/flows/validate', { ...flow, sessionType: 'voice' });
  expect(v.body.issues).toEqual([]);
  const agentId = (await http.post('/api/agents', { name: 'Speech URLs', flow })).body.id as string;
  const started = await http.post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const client = new VoiceClient({
    url: stack.baseUrl.replace(/^http/, 'ws') + String(started.body.audioPath),
  });
  await client.ready;
  await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
  client.close();
  await client.closed;
  return {
    segment: client.segments[0]!,
    requirements: v.body.requirements as { provider: string; key: string }[],
  };
}

describe('a TTS whose plugin connects by itself, at a flow address', () => {
  it('elevenlabs speaks from its address, which gets no server key (not trusted)', async () => {
    const { segment, requirements } = await greetingOf(
      withTts({ provider: 'elevenlabs', voiceId: 'v-9', baseURL: eleven.baseURL }),
    );
    expect(segment.audibleAt).toBeDefined();
    expect(segment.playedMs).toBeGreaterThan(500);
    expect(requirements).toContainEqual({ provider: 'elevenlabs', nodeIds: ['tts'], key: 'none' });
    const [socket] = eleven.sockets;
    expect(socket!.path).toBe('/v1/text-to-speech/v-9/multi-stream-input');
    expect(socket!.query.get('output_format')).toBe('pcm_22050');
    // the keyless placeholder, never the operator's key
    expect(eleven.sockets.map((s) => s.apiKey)).toEqual(eleven.sockets.map(() => 'no-key'));
    expect([...socket!.contexts.values()].flat().join(' ')).toBe(GREETING);
  }, 40_000);

  it('deepgram speaks from its address, which the operator trusts with the server key', async () => {
    const { segment, requirements } = await greetingOf(
      withTts({ provider: 'deepgram', baseURL: deepgram.baseURL }),
    );
    expect(segment.audibleAt).toBeDefined();
    expect(segment.playedMs).toBeGreaterThan(500);
    expect(requirements).toContainEqual({ provider: 'deepgram', nodeIds: ['tts'], key: 'server' });
    const [stream] = deepgram.streams;
    expect(stream!.authorization).toBe(`Token ${SERVER_DEEPGRAM}`);
    expect(stream!.query.get('encoding')).toBe('linear16');
    expect(stream!.texts.join('').trim()).toBe(GREETING);
  }, 40_000);

  // a name is refused even when it names the stub itself: a connection made anyway would show on its counters
  const byName = (url: string) => url.replace('127.0.0.1', 'localhost');
  it.each([
    ['elevenlabs', 'a name for its stub', () => `${byName(eleven.baseURL)}/v1`, 'BASE_URL_UNSUPPORTED'],
    ['deepgram', 'a name for its stub', () => byName(deepgram.baseURL), 'BASE_URL_UNSUPPORTED'],
    ['elevenlabs', 'an internal address', () => 'http://10.0.0.5:8080/v1', 'URL_NOT_ALLOWED'],
    ['deepgram', 'the metadata address', () => 'http://[::ffff:169.254.169.254]', 'URL_NOT_ALLOWED'],
  ])('%s at %s: %s on validate and on start, nothing connects', async (provider, _what, urlOf, code) => {
    const baseURL = urlOf();
    const before = eleven.sockets.length + deepgram.streams.length;
    const flow = withTts({ provider, baseURL });
    const v = await http.post('/api/flows/validate', { ...flow, sessionType: 'voice' });
    expect(v.body.issues).toEqual([expect.objectContaining({ code, nodeId: 'tts' })]);
    const agentId = (await http.post('/api/agents', { name: 'Refused', flow })).body.id as string;
    const started = await http.post(`/api/agents/${agentId}/voice-sessions`, {
      apiKeys: { openai: KEY, [provider]: 'a-key-of-the-caller' },
    });
    expect(started.status).toBe(422);
    expect(started.body.details).toEqual([expect.objectContaining({ code, nodeId: 'tts' })]);
    expect(eleven.sockets.length + deepgram.streams.length).toBe(before);
  });
});

describe('a speech model that fails: one error event per failure, of the kind the docs give', () => {
  /** A voice session of `flow` with the greeting played (or failed), the caller saying one sentence. */
  async function failing(flow: Flow, opts: { speak: boolean }) {
    const agentId = (await http.post('/api/agents', { name: 'Failing speech', flow })).body.id as string;
    const started = await http.post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const client = new VoiceClient({
      url: stack.baseUrl.replace(/^http/, 'ws') + String(started.body.audioPath),
    });
    await client.ready;
    if (opts.speak) client.say(speak('I would like to book an appointment please'));
    return client;
  }
  const errors = (client: VoiceClient) => client.events.filter((e) => e.type === 'error');
  const insideURL = () => `http://${INSIDE}:${new URL(speech.baseURL).port}/v1`;

  it.each([
    ['refused by the egress policy', insideURL, 'unreachable', 'the stt model could not be reached'],
    [
      'answering 401',
      () => refusing.baseURL,
      'auth',
      'the stt model answered 401: 401 invalid key Bearer [redacted]',
    ],
  ])(
    'an STT %s: the caller is told',
    async (_what, urlOf, kind, message) => {
      const flow = voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
      flow.nodes = flow.nodes.map((n) => (n.id === 'stt' ? { ...n, baseURL: urlOf() } : n));
      const client = await failing(flow, { speak: true });
      await vi.waitFor(() => expect(errors(client).length).toBeGreaterThan(0), { timeout: 30_000 });
      const [first] = errors(client);
      expect(first).toMatchObject({ code: 'STT_ERROR', nodeId: 'stt', kind, message });
      // each utterance is one request, and one failure: as many events as requests
      const asked = kind === 'auth' ? refusing.requests.transcriptions.length : undefined;
      client.close();
      await client.closed;
      if (asked !== undefined) expect(errors(client).length).toBeLessThanOrEqual(asked);
      expect(JSON.stringify(client.events)).not.toContain(KEY);
    },
    60_000,
  );

  it('a TTS refused by the egress policy: unreachable, once for a greeting of two sentences', async () => {
    const flow = voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
    flow.nodes = flow.nodes.map((n) =>
      n.id === 'tts'
        ? { ...n, baseURL: insideURL() }
        : n.id === 'start'
          ? { ...n, command: 'Hello, this is the clinic of the valley. How can I help you today?' }
          : n,
    );
    const client = await failing(flow, { speak: false });
    await vi.waitFor(
      () => expect(client.events.some((e) => e.type === 'agent_reply' && e.stepId === 'start')).toBe(true),
      { timeout: 30_000 },
    );
    // the greeting is over (its reply is on record): every error it caused is in
    await vi.waitFor(() => expect(errors(client).length).toBeGreaterThan(0), { timeout: 10_000 });
    expect(errors(client)).toEqual([
      expect.objectContaining({
        code: 'TTS_ERROR',
        nodeId: 'tts',
        kind: 'unreachable',
        message: 'the tts model could not be reached',
        stepId: 'start',
      }),
    ]);
    client.close();
    await client.closed;
  }, 60_000);
});
