import { routes } from '@vab/gateway';
import type { RoomAgents } from '@vab/playground';
import { fullFlow, startLivekitFake } from '@vab/testkit';
import { TokenVerifier } from 'livekit-server-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startStack, type Stack } from '../../helpers/stack.js';

const roomAgents: RoomAgents = { start: async () => ({ stop: async () => undefined }) };
let fake: Awaited<ReturnType<typeof startLivekitFake>>;
let stack: Stack;
let http: ReturnType<typeof api>;

beforeAll(async () => {
  fake = await startLivekitFake();
  stack = await startStack({
    roomAgents,
    providerEnv: {
      LIVEKIT_URL: fake.url,
      LIVEKIT_API_KEY: fake.apiKey,
      LIVEKIT_API_SECRET: fake.apiSecret,
      OPENAI_API_KEY: 'sk-server-openai',
      ELEVEN_API_KEY: 'server-eleven',
      DEEPGRAM_API_KEY: 'server-deepgram',
    },
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
  await fake.close();
});

describe('lenient where the spec is silent', () => {
  it('a route that takes no body ignores a JSON Content-Type with an empty body', async () => {
    const agent = (await http.post('/api/agents', { name: 'No body' })).body.id as string;
    const bodiless = routes.filter((r) => !r.body && r.method !== 'GET');
    expect(bodiless.map((r) => `${r.method} ${r.url}`)).toEqual(
      expect.arrayContaining(['DELETE /api/agents/:id', 'DELETE /api/agents/:id/text-sessions/:sessionId']),
    );
    for (const r of [...bodiless, ...routes.filter((x) => x.method === 'GET')]) {
      const path = r.url
        .replace(':id', agent)
        .replace(':version', '1')
        .replace(':a', '1')
        .replace(':b', '1')
        .replace(/:\w+/g, '00000000-0000-0000-0000-000000000000');
      const res = await http.raw(r.method, path, undefined, { 'content-type': 'application/json' });
      expect([400, 415], `${r.method} ${r.url}: ${JSON.stringify(res.body)}`).not.toContain(res.status);
    }
    expect((await http.get(`/api/agents/${agent}`)).status).toBe(404); // the DELETE archived it
    // a route that takes an optional body takes none too, and a required one still answers 400
    const live = (await http.post('/api/agents', { name: 'Restorable' })).body.id as string;
    const restored = await http.raw('POST', `/api/agents/${live}/versions/1/restore`, '', {
      'content-type': 'application/json',
    });
    expect(restored.status).toBe(200);
    const empty = await http.raw('POST', '/api/agents', '', { 'content-type': 'application/json' });
    expect(empty.status).toBe(400);
  });

  it('livekit null, empty or partial, and null or empty apiKeys entries, fall back to the environment', async () => {
    const start = (extra: object) => http.post('/api/agent-session', { ...fullFlow(), ...extra });
    for (const livekit of [null, {}, { url: '', apiKey: null, apiSecret: '  ' }, { url: fake.url }]) {
      const res = await start({ livekit, apiKeys: { openai: null, elevenlabs: '', deepgram: null } });
      expect(res.status, JSON.stringify(livekit)).toBe(200);
      expect(res.body.serverUrl).toBe(fake.url);
      // signed with the server's secret, for the server's own media server
      await new TokenVerifier(fake.apiKey, fake.apiSecret).verify(res.body.token);
      await http.delete('/api/agent-session', { roomName: res.body.roomName });
    }
    expect((await start({ apiKeys: null })).status).toBe(200);
  });

  it("never signs for a media server the request names with the server's own key and secret", async () => {
    const elsewhere = await http.post('/api/agent-session', {
      ...fullFlow(),
      livekit: { url: 'wss://media.attacker.example' },
    });
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.body.code).toBe('MISSING_CREDENTIALS');
    expect(elsewhere.body.message).toContain('livekit.apiKey');
    expect(
      fake.calls.every((c) => c.method !== 'CreateRoom' || !String(c.body.name).includes('attacker')),
    ).toBe(true);
  });
});
