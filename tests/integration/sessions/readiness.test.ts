import type { RoomAgent, RoomAgents } from '@vab/playground';
import { fullFlow, startLivekitFake, withNode } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

// Every provider the flow format names, and one it does not.
const LLMS = ['openai', 'anthropic', 'groq', 'google', 'mistral'];
const TTSS = ['elevenlabs', 'openai', 'deepgram', 'cartesia', 'acme'];
const STTS = ['deepgram', 'openai', 'whisperx'];
const KEYS = Object.fromEntries([...LLMS, ...TTSS, ...STTS].map((p) => [p, `key-${p}`]));

const roomAgents: RoomAgents = {
  async start(): Promise<RoomAgent> {
    return { stop: async () => undefined };
  },
};
let stack: Stack;
let http: ReturnType<typeof api>;
let fake: Awaited<ReturnType<typeof startLivekitFake>>;
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;

beforeAll(async () => {
  fake = await startLivekitFake();
  stub = await startOpenAiStub(() => ({ content: 'ok' }));
  stack = await startStack({ roomAgents, playground: { MAX_SESSIONS: 1000 } });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
  await fake.close();
  await stub.close();
});

const codes = (issues: { code: string }[]) => issues.map((i) => i.code).sort();

describe('validate = start: a flow validate accepts starts, one it rejects never does', () => {
  const combos = LLMS.flatMap((llm) => TTSS.flatMap((tts) => STTS.map((stt) => [llm, tts, stt] as const)));

  it(`voice, on all ${combos.length} combinations of LLM, TTS and STT providers`, async () => {
    const accepted: string[] = [];
    for (const [llm, tts, stt] of combos) {
      const flow = withNode(
        withNode(withNode(fullFlow(), 'llm', { provider: llm }), 'tts', { provider: tts }),
        'stt',
        { provider: stt },
      );
      const v = await http.post('/api/flows/validate', flow);
      expect(v.status).toBe(200);
      const start = await http.post('/api/agent-session', {
        ...flow,
        livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
        apiKeys: KEYS,
      });
      const label = `${llm}/${tts}/${stt}`;
      if (v.body.valid) {
        expect(start.status, label).toBe(200);
        accepted.push(label);
        await http.delete('/api/agent-session', { roomName: start.body.roomName });
      } else {
        expect(start.status, label).toBe(422);
        expect(codes(start.body.details), label).toEqual(codes(v.body.issues));
        expect(codes(v.body.issues), label).toEqual(expect.arrayContaining(['PROVIDER_UNSUPPORTED']));
      }
    }
    // what runs here: every LLM but the unknown one, TTS elevenlabs/openai/deepgram, STT deepgram/openai
    expect(accepted).toHaveLength(4 * 3 * 2);
    expect(fake.rooms.size).toBe(0);
  });

  it('text, on every LLM provider, at its own endpoint and at a base URL of the flow', async () => {
    const agent = (await http.post('/api/agents', { name: 'Combos', flow: fullFlow() })).body.id as string;
    const verdicts: Record<string, number> = {};
    for (const llm of LLMS) {
      for (const baseURL of [undefined, stub.baseURL]) {
        // speech providers do not matter to a text session, even ones this server cannot run
        const flow = withNode(withNode(fullFlow(), 'llm', { provider: llm, baseURL }), 'tts', {
          provider: 'cartesia',
        });
        const v = await http.post('/api/flows/validate', { ...flow, sessionType: 'text' });
        const start = await http.post(`/api/agents/${agent}/text-sessions`, { flow, apiKeys: KEYS });
        const label = `${llm}${baseURL ? ' at the flow URL' : ''}`;
        verdicts[label] = start.status;
        if (v.body.valid) {
          expect(start.status, label).toBe(201);
          await http.delete(`/api/agents/${agent}/text-sessions/${start.body.sessionId}`);
        } else {
          expect(start.status, label).toBe(422);
          expect(codes(start.body.details), label).toEqual(codes(v.body.issues));
        }
      }
    }
    expect(verdicts).toEqual({
      openai: 201,
      'openai at the flow URL': 201,
      anthropic: 201,
      'anthropic at the flow URL': 201,
      groq: 201,
      'groq at the flow URL': 201,
      google: 201,
      'google at the flow URL': 422, // the Gemini client cannot be pointed elsewhere through the egress check
      mistral: 422,
      'mistral at the flow URL': 422,
    });
  });
});
