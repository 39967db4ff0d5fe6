import type { Flow } from '@vab/contracts';
import { fullFlow, listenOnLoopback, startLivekitFake, withNode } from '@vab/testkit';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiStub, textOf, type ChatRequest } from '../../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';
import { loadConfig } from '@vab/playground';

const SERVER_KEY = 'sk-server-key-of-the-operator-0123';
const REQUEST_KEY = 'sk-request-key-of-the-caller-4567';
/** Every classification says "booking", every condition holds: the conversation heads for its end. */
function chat(req: ChatRequest) {
  const tools = (req.tools ?? []).map((t) => t.function.name);
  if (tools.includes('decide')) {
    const prompt = textOf(req.messages.at(-1)?.content).toLowerCase();
    return {
      toolCalls: [
        { name: 'decide', args: { choice: prompt.includes('why do they call') ? 'booking' : 'true' } },
      ],
    };
  }
  if (tools.includes('extract'))
    return { toolCalls: [{ name: 'extract', args: { name: 'Ada', urgent: false } }] };
  return { content: 'ok' };
}

let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
let fake: Awaited<ReturnType<typeof startLivekitFake>>;
let hooks: Server;
let hookPort = 0;
const hookHits: string[] = [];
const stacks: Stack[] = [];

beforeAll(async () => {
  stub = await startOpenAiStub(chat);
  fake = await startLivekitFake();
  hooks = createServer((req, res) => {
    hookHits.push(req.url ?? '');
    res.writeHead(204).end();
  });
  hookPort = await listenOnLoopback(hooks);
});
afterAll(async () => {
  for (const s of stacks) await s.close();
  await Promise.all([stub.close(), fake.close(), new Promise<void>((r) => hooks.close(() => r()))]);
});

async function stack(opts: Parameters<typeof startStack>[0]) {
  const s = await startStack(opts);
  stacks.push(s);
  return { stack: s, http: api(s.baseUrl) };
}

/** Every key the model endpoint was sent, as the bearer tokens it received. */
const keysSeen = () => new Set(stub.authorizations.map((a) => a?.replace(/^Bearer /, '')));

describe('the key rule: the server key goes only to its provider', () => {
  const flowAtStub = (): Flow => withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });

  it('a flow that names its own baseURL gets no server key: it runs keyless, or with a key sent', async () => {
    const { stack: s, http } = await stack({ providerEnv: { OPENAI_API_KEY: SERVER_KEY } });
    const agent = (await http.post('/api/agents', { name: 'Keys', flow: flowAtStub() })).body.id as string;

    // validate says no key is needed there (a local Ollama, vLLM or llama.cpp needs none)
    const v = await http.post('/api/flows/validate', { ...flowAtStub(), sessionType: 'text' });
    expect(v.body).toMatchObject({ valid: true, requirements: [{ provider: 'openai', key: 'none' }] });

    // without a key: the model is called with the placeholder, never the server's key
    const keyless = await http.post(`/api/agents/${agent}/text-sessions`, { apiKeys: { openai: ' ' } });
    expect(keyless.status).toBe(201);
    const reply = await http.post(`/api/agents/${agent}/text-sessions/${keyless.body.sessionId}/turns`, {
      text: 'Hello',
    });
    expect(reply.status).toBe(200);
    expect(keysSeen()).toContain('no-key');
    // voice alike: the flow's model needs no key; the others still do, and the message says how to send them
    const voice = await http.post('/api/agent-session', {
      ...flowAtStub(),
      livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
    });
    expect(voice.status).toBe(400);
    expect(voice.body.code).toBe('MISSING_CREDENTIALS');
    expect(voice.body.message).not.toContain('openai');
    expect(voice.body.message).toContain(
      'send apiKeys.elevenlabs, or set ELEVEN_API_KEY or ELEVENLABS_API_KEY',
    );

    // with a key sent, that key goes there
    const started = await http.post(`/api/agents/${agent}/text-sessions`, {
      apiKeys: { openai: REQUEST_KEY },
    });
    expect(started.status).toBe(201);
    const turn = await http.post(`/api/agents/${agent}/text-sessions/${started.body.sessionId}/turns`, {
      text: 'Hello',
    });
    expect(turn.status).toBe(200);
    expect(keysSeen()).toContain(REQUEST_KEY);
    expect(keysSeen()).not.toContain(SERVER_KEY);
    expect(s.logs.join('\n') + JSON.stringify([keyless.body, voice.body])).not.toContain(SERVER_KEY);
  });

  it('a model at its provider with no key anywhere: MISSING_CREDENTIALS says what to send or set', async () => {
    const { http } = await stack({ providerEnv: {} });
    const agent = (await http.post('/api/agents', { name: 'No key', flow: fullFlow() })).body.id as string;
    const refused = await http.post(`/api/agents/${agent}/text-sessions`, {});
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({
      code: 'MISSING_CREDENTIALS',
      message: 'missing API key for openai: send apiKeys.openai, or set OPENAI_API_KEY on the server',
    });
  });

  it('an endpoint the operator trusts (TRUSTED_MODEL_URLS) gets the server key', async () => {
    const trusted = loadConfig({ TRUSTED_MODEL_URLS: stub.baseURL }).TRUSTED_MODEL_URLS;
    const { http } = await stack({
      providerEnv: { OPENAI_API_KEY: SERVER_KEY },
      playground: { TRUSTED_MODEL_URLS: trusted },
    });
    const agent = (await http.post('/api/agents', { name: 'Gateway', flow: flowAtStub() })).body.id as string;
    const v = await http.post('/api/flows/validate', { ...flowAtStub(), sessionType: 'text' });
    expect(v.body.requirements).toEqual([{ provider: 'openai', nodeIds: ['llm'], key: 'server' }]);
    const started = await http.post(`/api/agents/${agent}/text-sessions`, {});
    expect(started.status).toBe(201);
    await http.post(`/api/agents/${agent}/text-sessions/${started.body.sessionId}/turns`, { text: 'Hi' });
    expect(keysSeen()).toContain(SERVER_KEY);
  });
});

describe('the URL policy: no flow request reaches an internal address unless allowed', () => {
  const nothingAllowed = { FLOW_EGRESS_ALLOW: [] };

  it('validate names every disallowed URL on its node; both starts refuse the flow before anything runs', async () => {
    const { http } = await stack({ playground: nothingAllowed });
    const agent = (await http.post('/api/agents', { name: 'SSRF', flow: fullFlow() })).body.id as string;
    const flow: Flow = withNode(
      withNode(fullFlow(), 'hook', { url: `http://127.0.0.1:${hookPort}/hook` }),
      'llm',
      { baseURL: 'http://169.254.169.254/latest/v1' },
    );
    const mcp = {
      id: 'tools',
      nodeType: 'mcp',
      serverUrl: 'http://[::ffff:10.0.0.1]/mcp',
      selectedTools: [],
    };
    const withMcp: Flow = {
      nodes: [...flow.nodes, mcp],
      edges: [
        ...flow.edges,
        { source: 'tools', sourceHandle: 'output', target: 'agent', targetHandle: 'tools_in' },
      ],
    };
    for (const sessionType of ['voice', 'text'] as const) {
      const v = await http.post('/api/flows/validate', { ...withMcp, sessionType });
      expect(v.body.valid).toBe(false);
      expect(v.body.issues.filter((i: { code: string }) => i.code === 'URL_NOT_ALLOWED')).toEqual([
        expect.objectContaining({ nodeId: 'llm', message: expect.stringContaining('link-local') }),
        expect.objectContaining({ nodeId: 'hook', message: expect.stringContaining('loopback') }),
        expect.objectContaining({ nodeId: 'tools', message: expect.stringContaining('private') }),
      ]);
    }
    const text = await http.post(`/api/agents/${agent}/text-sessions`, {
      flow: withMcp,
      apiKeys: { openai: REQUEST_KEY },
    });
    expect(text.status).toBe(422);
    expect(text.body.details.map((i: { code: string }) => i.code)).toContain('URL_NOT_ALLOWED');
    const voice = await http.post('/api/agent-session', {
      ...withMcp,
      agentId: agent,
      livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
      apiKeys: { openai: REQUEST_KEY, elevenlabs: 'k', deepgram: 'k' },
    });
    expect(voice.status).toBe(422);
    expect((await http.get(`/api/agents/${agent}/test-sessions`)).body).toEqual([]);
    expect(fake.rooms.size).toBe(0);
    expect(hookHits).toEqual([]);
  });

  it('at run time, a name that resolves inside is refused and logged, never called', async () => {
    // names resolve as the test says: the model's to loopback (allowed by name), the webhook's to loopback
    const { stack: s, http } = await stack({
      playground: loadConfig({ FLOW_EGRESS_ALLOW: 'model.test' }),
      resolve: async (host) => {
        if (host === 'model.test' || host === 'hooks.test') return [{ address: '127.0.0.1', family: 4 }];
        throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      },
    });
    const modelUrl = stub.baseURL.replace('127.0.0.1', 'model.test');
    const flow = withNode(
      withNode(withNode(fullFlow(), 'llm', { baseURL: modelUrl, model: 'stub' }), 'hook', {
        url: `http://hooks.test:${hookPort}/hook`,
      }),
      'burst',
      { rounds: 1 },
    );
    const v = await http.post('/api/flows/validate', { ...flow, sessionType: 'text' });
    expect(v.body.valid).toBe(true); // a name: checked when connecting
    const agent = (await http.post('/api/agents', { name: 'Rebind', flow })).body.id as string;
    const started = await http.post(`/api/agents/${agent}/text-sessions`, {
      apiKeys: { openai: REQUEST_KEY },
    });
    expect(started.status).toBe(201);
    const turn = (text: string) =>
      http.post(`/api/agents/${agent}/text-sessions/${started.body.sessionId}/turns`, { text });
    await turn('Hi');
    await turn('I want to book');
    const end = await turn('yes');
    expect(end.body.ended).toBe(true);
    await http.delete(`/api/agents/${agent}/text-sessions/${started.body.sessionId}`);
    const refusals = s.logs.filter((l) => l.includes('webhook refused'));
    expect(refusals).toHaveLength(1);
    expect(JSON.parse(refusals[0]!)).toMatchObject({ host: 'hooks.test', range: 'loopback' });
    expect(s.logs.some((l) => l.includes('flow egress refused'))).toBe(true);
    expect(hookHits).toEqual([]);
  });
});

describe('IPv6 forms that carry an IPv4 address are judged by it (issue 35 #4)', () => {
  it.each([
    ['http://[::169.254.169.254]/hook', 'link-local'],
    ['http://[::127.0.0.1]:9/hook', 'loopback'],
    ['http://[64:ff9b::a00:1]/hook', 'private'],
    ['http://[2002:a9fe:a9fe::1]/hook', 'link-local'],
  ])('a webhook at %s is refused as %s', async (url, range) => {
    const { http } = await stack({ playground: { FLOW_EGRESS_ALLOW: [] } });
    const v = await http.post('/api/flows/validate', {
      ...withNode(fullFlow(), 'hook', { url }),
      sessionType: 'text',
    });
    expect(v.body.valid).toBe(false);
    expect(v.body.issues).toContainEqual(
      expect.objectContaining({
        code: 'URL_NOT_ALLOWED',
        nodeId: 'hook',
        message: expect.stringContaining(range),
      }),
    );
  });
});

describe('the media server a request names goes through the same check (issue 35 #1)', () => {
  const voiceFlow = () => withNode(fullFlow(), 'hook', { url: 'https://hooks.example.com/x' });
  const start = (http: ReturnType<typeof api>, url: string) =>
    http.post('/api/agent-session', {
      ...voiceFlow(),
      livekit: { url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
      apiKeys: { openai: REQUEST_KEY, elevenlabs: 'k', deepgram: 'k' },
    });

  it('a name that resolves to loopback, and every literal loopback form, is refused before any call', async () => {
    const { http } = await stack({
      playground: { FLOW_EGRESS_ALLOW: [] },
      resolve: async (host) => {
        if (host === 'media.test') return [{ address: '127.0.0.1', family: 4 }];
        if (host === 'split.test')
          return [
            { address: '8.8.8.8', family: 4 },
            { address: '127.0.0.1', family: 4 },
          ];
        throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      },
    });
    const port = new URL(fake.url).port;
    const callsBefore = fake.calls.length;
    for (const host of [
      'media.test',
      'split.test',
      'LOCALHOST.',
      '0x7f.1',
      '[::127.0.0.1]',
      '[::ffff:7f00:1]',
    ]) {
      const res = await start(http, `ws://${host}:${port}`);
      expect(res.status, host).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
      expect(JSON.stringify(res.body), host).toMatch(/body\.livekit\.url.*loopback/);
    }
    expect(fake.calls.length).toBe(callsBefore);
    expect(fake.rooms.size).toBe(0);
  });

  it('a redirect is an answer, not a hop; a refused and a reset connection read alike', async () => {
    const redirects: string[] = [];
    const redirector = createServer((req, res) => {
      redirects.push(req.url ?? '');
      res.writeHead(307, { location: `${fake.url.replace('ws:', 'http:')}${req.url ?? ''}` }).end();
    });
    const redirectPort = await listenOnLoopback(redirector);
    const gone = createServer();
    const closedPort = await listenOnLoopback(gone); // a port nothing listens on once closed
    await new Promise<void>((r) => gone.close(() => r()));
    const resetter = createServer((req) => req.socket.destroy());
    const resetPort = await listenOnLoopback(resetter);
    try {
      // the redirector's name is allowed (it resolves to loopback); where it redirects to is not followed
      const { http } = await stack({
        playground: loadConfig({ FLOW_EGRESS_ALLOW: 'redirect.test,lan.test' }),
        resolve: async (host) => {
          if (host === 'redirect.test' || host === 'lan.test') return [{ address: '127.0.0.1', family: 4 }];
          throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
        },
      });
      const callsBefore = fake.calls.length;
      const redirected = await start(http, `ws://redirect.test:${redirectPort}`);
      expect(redirects).toEqual(['/twirp/livekit.RoomService/CreateRoom']);
      expect(redirected.status).toBe(502);
      expect(fake.calls.length).toBe(callsBefore);
      expect(fake.rooms.size).toBe(0);

      const answers = [];
      for (const port of [closedPort, resetPort]) {
        const res = await start(http, `ws://lan.test:${port}`);
        answers.push({ status: res.status, code: res.body.code, message: res.body.message });
      }
      expect(answers[0]).toEqual({
        status: 502,
        code: 'UPSTREAM_FAILED',
        message: 'the media server is unreachable (create the room)',
      });
      expect(answers[1]).toEqual(answers[0]);
    } finally {
      await new Promise<void>((r) => redirector.close(() => r()));
      await new Promise<void>((r) => resetter.close(() => r()));
    }
  });
});
