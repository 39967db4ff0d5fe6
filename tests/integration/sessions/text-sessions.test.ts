import { fullFlow, startLivekitFake, withNode } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clinicScript, startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import { api, keysMatching, startStack, type Stack } from '../../helpers/stack.js';

const KEY = 'sk-test-never-logged-0123456789';
let stack: Stack;
let http: ReturnType<typeof api>;
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;

const script = clinicScript;

const flowFor = () =>
  withNode(withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }), 'hook', {
    url: 'http://127.0.0.1:9/unreachable',
  });

beforeAll(async () => {
  stub = await startOpenAiStub(script);
  stack = await startStack();
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
  await stub.close();
});

async function agentWithFlow() {
  const res = await http.post('/api/agents', { name: 'Clinic', flow: flowFor() });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

describe('text test sessions', () => {
  it('talks to the stored flow, records every message with its step, and closes the test session', async () => {
    const agentId = await agentWithFlow();
    const started = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({
      replies: ['Hello, this is the clinic.'],
      stepId: 'start',
      stepType: 'start',
      ended: false,
    });
    const sessionId = started.body.sessionId as string;
    const turn = (text: string) =>
      http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text });

    const t1 = await turn('Hi');
    expect(t1.status).toBe(200);
    expect(t1.body).toMatchObject({
      sessionId,
      replies: ['ok: Hi'],
      stepId: 'burst',
      stepChanges: [{ stepId: 'burst', stepType: 'burst' }],
    });
    await turn('Ada');
    await turn('1815');
    const book = await turn('I want to book, yes please');
    expect(book.body.stepChanges.map((c: { stepId: string }) => c.stepId)).toEqual(['cat', 'ifelse', 'end']);
    expect(book.body).toMatchObject({ ended: true, stepId: 'end' });
    expect(book.body.replies.at(-1)).toBe('Goodbye!');

    // the transcript is in the sessions service, each message with the step that was current
    const sessions = await http.get(`/api/agents/${agentId}/test-sessions`);
    expect(sessions.body[0]).toMatchObject({ id: sessionId, sessionType: 'text' });
    // the end step closes the record with one bus request, bounded by BUS_TIMEOUT_MS (5 s by default)
    await expect
      .poll(async () => (await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).body.status, {
        timeout: 5_000,
        interval: 50,
      })
      .toBe('closed');
    const messages = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`);
    expect(messages.body.map((m: { role: string; stepId: string }) => `${m.role}@${m.stepId}`)).toEqual([
      'assistant@start',
      'user@start',
      'assistant@burst',
      'user@burst',
      'assistant@burst',
      'user@burst',
      'assistant@talk',
      'user@talk',
      'assistant@end',
    ]);

    expect((await http.delete(`/api/agents/${agentId}/text-sessions/${sessionId}`)).body).toEqual({
      ok: true,
    });
    expect((await http.delete(`/api/agents/${agentId}/text-sessions/${sessionId}`)).body).toEqual({
      ok: true,
    });
    expect((await turn('still there?')).status).toBe(404);

    // the key was used, and appears nowhere
    expect(stub.requests.length).toBeGreaterThan(0);
    const redisDump = JSON.stringify(
      await Promise.all((await keysMatching(stack.redis, '*')).map((k) => stack.redis.dump(k))),
    );
    expect(
      stack.logs.join('\n') + redisDump + JSON.stringify([started.body, t1.body, book.body]),
    ).not.toContain(KEY);
  });

  it('tries an unsaved flow sent with the request', async () => {
    const agentId = await agentWithFlow();
    const draft = withNode(flowFor(), 'start', { command: 'Draft greeting.' });
    const res = await http.post(`/api/agents/${agentId}/text-sessions`, {
      flow: draft,
      apiKeys: { openai: KEY },
    });
    expect(res.status).toBe(201);
    expect(res.body.replies).toEqual(['Draft greeting.']);
    await http.delete(`/api/agents/${agentId}/text-sessions/${res.body.sessionId}`);
  });

  it('refuses an invalid flow with 422 and its issues, a missing key with 400 naming the provider, creating nothing', async () => {
    const agentId = await agentWithFlow();
    const invalid = await http.post(`/api/agents/${agentId}/text-sessions`, {
      flow: { nodes: [], edges: [] },
      apiKeys: { openai: KEY },
    });
    expect(invalid.status).toBe(422);
    expect(invalid.body.code).toBe('FLOW_INVALID');
    expect(invalid.body.details.map((i: { code: string }) => i.code)).toEqual(
      expect.arrayContaining(['NO_AGENT', 'NO_START']),
    );
    // the model at its provider's own endpoint, and no key anywhere (at the flow's own URL it runs keyless)
    const noKey = await http.post(`/api/agents/${agentId}/text-sessions`, {
      flow: withNode(flowFor(), 'llm', { baseURL: '' }),
    });
    expect(noKey.status).toBe(400);
    expect(noKey.body).toMatchObject({ code: 'MISSING_CREDENTIALS' });
    expect(noKey.body.message).toContain('send apiKeys.openai, or set OPENAI_API_KEY on the server');
    const google = await http.post(`/api/agents/${agentId}/text-sessions`, {
      flow: withNode(flowFor(), 'llm', { provider: 'google' }),
      apiKeys: { google: KEY },
    });
    expect(google.status).toBe(422);
    expect((await http.get(`/api/agents/${agentId}/test-sessions`)).body).toEqual([]);
    expect(
      (
        await http.post('/api/agents/00000000-0000-0000-0000-000000000000/text-sessions', {
          apiKeys: { openai: KEY },
        })
      ).status,
    ).toBe(404);
  });

  it('reaches the owning instance wherever the request lands', async () => {
    await stack.addPlayground();
    await stack.addPlayground();
    const agentId = await agentWithFlow();
    const started = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
    const sessionId = started.body.sessionId as string;
    // queue groups spread these over three instances; every one must reach the owner
    for (let i = 0; i < 6; i++) {
      const res = await http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, {
        text: `turn ${i}`,
      });
      expect(res.status).toBe(200);
      expect(res.body.sessionId).toBe(sessionId);
    }
    expect((await http.delete(`/api/agents/${agentId}/text-sessions/${sessionId}`)).body).toEqual({
      ok: true,
    });
    for (let i = 0; i < 3; i++) {
      expect(
        (await http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text: 'x' })).status,
      ).toBe(404);
    }
  });

  it('shares one capacity with voice sessions: a full instance takes neither, a freed slot either', async () => {
    const fake = await startLivekitFake();
    const small = await startStack({
      roomAgents: { start: async () => ({ stop: async () => undefined }) },
      playground: { MAX_SESSIONS: 2 },
    });
    const h = api(small.baseUrl);
    try {
      const agentId = (await h.post('/api/agents', { name: 'Shared', flow: flowFor() })).body.id as string;
      const voice = () =>
        h.post('/api/agent-session', {
          ...flowFor(),
          livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
          apiKeys: { openai: KEY, elevenlabs: KEY, deepgram: KEY },
        });
      const text = () => h.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
      const room = await voice();
      expect(room.status).toBe(200);
      const typed = await text();
      expect(typed.status).toBe(201);
      for (const full of [await voice(), await text()]) {
        expect(full.status).toBe(503);
        expect(full.body.code).toBe('CAPACITY_EXHAUSTED');
      }
      await h.delete('/api/agent-session', { roomName: room.body.roomName });
      const again = await text();
      expect(again.status).toBe(201);
      await h.delete(`/api/agents/${agentId}/text-sessions/${typed.body.sessionId}`);
      expect((await voice()).status).toBe(200);
    } finally {
      await small.close();
      await fake.close();
    }
  });
});
