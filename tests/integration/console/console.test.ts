import { SessionEvent, type SessionEventInput } from '@vab/contracts';
import { edge, fullFlow, launchChromium, withNode } from '@vab/testkit';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { clinicScript, startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import { watchedPage } from '../../helpers/pages.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; media-src 'self'; " +
  "img-src 'self' data:; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
const KEY = 'sk-test-console-0123456789';
/**
 * What the page shows after a click comes with an API call's answer, which the gateway gives within its
 * REQUEST_TIMEOUT_MS (a start answers once its greeting is made, a turn with its reply, an end once the session
 * has stopped): every wait here has that bound, not expect.poll's 1 s, which a loaded machine overran.
 */
const REQUEST_TIMEOUT_MS = 5000;
vi.setConfig({ expect: { poll: { timeout: REQUEST_TIMEOUT_MS } } });

let stack: Stack;
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
let browser: Browser;

beforeAll(async () => {
  stub = await startOpenAiStub(clinicScript);
  stack = await startStack({ requestTimeoutMs: REQUEST_TIMEOUT_MS });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
  await stub?.close();
});

describe('the console', () => {
  it('runs a text session: the reply streams in, the step is drawn, the turn is charted, and it replays', async () => {
    const http = api(stack.baseUrl);
    const flow = withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });
    const created = await http.post('/api/agents', { name: 'Console clinic', flow });
    expect(created.status).toBe(201);
    const agentId = created.body.id as string;

    const { page, problems } = await watchedPage(browser);
    const turnAnswers: string[] = [];
    page.on('response', (res) => {
      if (res.url().endsWith('/turns')) turnAnswers.push(res.headers()['content-type'] ?? '');
    });
    // what a reply bubble showed while it was still streaming (deltas in, final text not yet)
    await page.addInitScript({
      content: `window.streamed = [];
        new MutationObserver(() => {
          for (const li of document.querySelectorAll('li.agent.streaming')) window.streamed.push(li.textContent);
        }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });`,
    });
    await page.goto(`${stack.baseUrl}/console`);
    await page.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
    await page.selectOption('#agent', agentId);
    await page.locator('#version option[value="latest"]').waitFor({ state: 'attached' });
    await page.click('summary');
    await page.fill('#keys', `openai=${KEY}`);
    await page.click('#start');

    const log = page.locator('#log');
    await expect
      .poll(() => log.locator('li.agent').allTextContents())
      .toEqual(['Hello, this is the clinic.']);
    await page.locator('#turn:enabled').waitFor();
    await page.fill('#turn', 'Hi');
    await page.press('#turn', 'Enter');
    await expect
      .poll(() => log.locator('li.agent').allTextContents())
      .toEqual(['Hello, this is the clinic.', 'ok: Hi']);
    // the reply came as the turn's own event stream, not as its JSON answer, drawn from its deltas
    expect(turnAnswers).toEqual([expect.stringContaining('text/event-stream')]);
    expect(await page.evaluate<string[]>('window.streamed')).toContain('ok: Hi');
    await expect.poll(() => log.locator('li.user').allTextContents()).toEqual(['Hi']);
    await expect.poll(() => page.locator('#flow .node.current').getAttribute('data-node-id')).toBe('burst');
    expect(await page.locator('#flow .node.visited[data-node-id="start"]').count()).toBe(1);
    await expect.poll(() => page.locator('#chart rect.bar-turnMs').count()).toBeGreaterThanOrEqual(1);
    await expect.poll(() => page.locator('#chart rect.bar-llmTtftMs').count()).toBeGreaterThanOrEqual(1);
    await page.screenshot({ path: '/tmp/console.png' });

    await page.click('#end');
    await expect.poll(() => log.locator('li.event').last().textContent()).toMatch(/^Session ended/);
    expect(await page.locator('#turn').isDisabled()).toBe(true);

    // the past session, replayed from its events stream
    const sessions = await http.get(`/api/agents/${agentId}/test-sessions`);
    const sessionId = sessions.body[0].id as string;
    await page.click('#refresh');
    await page.click(`#sessions button[data-session-id="${sessionId}"]`);
    await expect.poll(() => log.locator('li.event').last().textContent()).toMatch(/^Session ended/);
    expect(await log.locator('li.agent').allTextContents()).toEqual(['Hello, this is the clinic.', 'ok: Hi']);
    expect(await log.locator('li.user').allTextContents()).toEqual(['Hi']);
    expect(await log.locator('li.event').first().textContent()).toMatch(/^Session started/);
    expect(await page.locator('#flow .node.current').getAttribute('data-node-id')).toBe('burst');
    expect(await page.locator('#chart rect.bar-turnMs').count()).toBeGreaterThanOrEqual(1);
    await page.screenshot({ path: '/tmp/console-replay.png' });

    // the draft: the stored flow sent as it is, run as no version
    await page.selectOption('#version', 'draft');
    await page.click('#start');
    await expect
      .poll(() => log.locator('li.agent').allTextContents())
      .toEqual(['Hello, this is the clinic.']);
    expect(await log.locator('li.event').first().textContent()).toBe('Session started text, draft');
    await page.click('#end');
    await expect.poll(() => log.locator('li.event').last().textContent()).toMatch(/^Session ended/);

    expect(problems).toEqual([]);
    await page.close();
  });

  it('helps a builder: a template, a validate issue fixed in the editor, a run, a test case, a failed attempt', async () => {
    const { page, problems } = await watchedPage(browser);
    await page.goto(`${stack.baseUrl}/console`);
    await page.click('#new-agent summary');
    await page.fill('#new-name', 'Builder desk');
    await page.selectOption('#template', 'greeter');
    await page.click('#create');
    await expect.poll(() => page.locator('#agent option:checked').textContent()).toBe('Builder desk');
    const agentId = await page.locator('#agent').inputValue();
    await expect.poll(() => page.locator('#flow-json').inputValue()).toContain('"nodeType": "burst"');

    // the template's model is at OpenAI and the server has no key: asked for before anything starts
    await page.click('#start');
    await expect.poll(() => page.locator('#needs').textContent()).toContain('needs a key for openai');
    expect(await page.locator('#keys-box[open]').count()).toBe(1);
    expect(await page.locator('#turn').isDisabled()).toBe(true);
    expect((await api(stack.baseUrl).get(`/api/agents/${agentId}/test-sessions`)).body).toEqual([]);
    // the key box is kept across a reload (this tab's sessionStorage)
    await page.fill('#keys', 'groq=gsk-kept');
    await page.reload();
    await expect.poll(() => page.locator('#keys').inputValue()).toBe('groq=gsk-kept');
    await page.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
    await page.selectOption('#agent', agentId);
    await expect.poll(() => page.locator('#flow-json').inputValue()).toContain('"nodeType": "burst"');

    // the editor: point the model at a local server (no key needed), and a mistake validate finds at its node
    const edit = async (
      change: (flow: { nodes: Record<string, unknown>[]; edges: Record<string, unknown>[] }) => void,
    ) => {
      const flow = JSON.parse(await page.locator('#flow-json').inputValue());
      change(flow);
      await page.fill('#flow-json', JSON.stringify(flow, null, 2));
    };
    const node = (flow: { nodes: Record<string, unknown>[] }, id: string) =>
      flow.nodes.find((n) => n.id === id)!;
    await page.click('#editor summary').catch(() => undefined);
    await edit((f) => {
      Object.assign(node(f, 'llm'), { baseURL: stub.baseURL, model: 'stub' });
      node(f, 'burst').rounds = 20;
    });
    await page.click('#validate');
    const issue = page.locator('#issues li.issue[data-node-id="burst"]');
    await expect.poll(() => issue.textContent()).toContain('`rounds` must be a whole number from 1 to 10');
    expect(await issue.getAttribute('data-code')).toBe('PARAM_OUT_OF_RANGE');
    expect(await page.locator('#flow .node.issue[data-node-id="burst"]').count()).toBe(1);
    await edit((f) => {
      node(f, 'burst').rounds = 1;
    });
    await page.click('#validate');
    await expect.poll(() => page.locator('#issues').textContent()).toBe('No issues: the flow can run.');
    await page.click('#save');
    await expect
      .poll(() => page.locator('#version option[value="latest"]').textContent())
      .toBe('Latest (version 2)');

    // run it: a literal greeting called no model, so it is no bar of the chart; the turn is
    const log = page.locator('#log');
    await page.click('#start');
    await expect.poll(() => log.locator('li.agent').allTextContents()).toEqual(['Hello! How can I help?']);
    expect(await page.locator('#chart rect.bar').count()).toBe(0);
    await page.locator('#turn:enabled').waitFor();
    await page.fill('#turn', 'Hi');
    await page.press('#turn', 'Enter');
    await expect
      .poll(() => log.locator('li.agent').allTextContents())
      .toEqual(['Hello! How can I help?', 'ok: Hi']);
    await expect.poll(() => page.locator('#chart rect.bar-llmTtftMs').count()).toBe(1);
    await page.click('#end');
    await expect.poll(() => log.locator('li.event').last().textContent()).toMatch(/^Session ended/);

    // the session becomes a test case; then the flow changes so that the case no longer holds
    await page.click('#add-case');
    await expect.poll(() => page.locator('#cases li[data-case-id]').count()).toBe(1);
    await edit((f) => {
      f.nodes = f.nodes.filter((n) => n.id !== 'burst');
      f.edges = f.edges.filter((e) => e.source !== 'burst' && e.target !== 'burst');
      f.edges.push(edge('start', 'output', 'end'));
    });
    await page.click('#save');
    await expect
      .poll(() => page.locator('#version option[value="latest"]').textContent())
      .toBe('Latest (version 3)');
    await page.click('#run-tests');
    await expect
      .poll(() => page.locator('#run .run-head').textContent(), { timeout: 30_000 })
      .toMatch(/^Run of v3: failed · 0\/1 passed · 1 failed/);
    const runCase = page.locator('#run li.run-case');
    expect(await runCase.locator('.verdict').textContent()).toBe('failed');
    expect(await runCase.textContent()).toContain('pass rate 0 %');
    expect(await runCase.locator('.failure').count()).toBeGreaterThan(0);
    // the attempt's row among the past sessions names its case and verdict
    await expect
      .poll(() => page.locator('#sessions .what').allTextContents())
      .toContain(
        `${await page.locator('#cases li[data-case-id]').evaluate((li) => li.firstChild?.textContent)} · failed · v3`,
      );
    // open the failed attempt: its conversation is replayed
    await runCase.locator('button.attempt').click();
    await expect.poll(() => log.locator('li.agent').first().textContent()).toBe('Hello! How can I help?');
    await expect.poll(() => log.locator('li.user').allTextContents()).toEqual(['Hi']);
    // at 1280 px too, the panels stay in the window (a wide drawing scrolls inside its own)
    for (const sel of ['.flow-panel', '.chart-panel']) {
      const box = (await page.locator(sel).boundingBox())!;
      expect(box.x + box.width, sel).toBeLessThanOrEqual(1280);
    }
    await page.screenshot({ path: '/tmp/console-builder.png' });
    expect(problems).toEqual([]);
    await page.close();
  }, 90_000);

  it('draws a flow readably: labels at their size, if/else exits named, a loop as two curves; fits 900 px', async () => {
    const http = api(stack.baseUrl);
    const flow = {
      nodes: [
        { id: 'agent', nodeType: 'agent', name: 'Loop', position: { x: 0, y: 0 } },
        { id: 'start', nodeType: 'start', command: 'Hi', isLiteral: true, position: { x: 0, y: 600 } },
        { id: 'talk', nodeType: 'burst', command: 'Talk', position: { x: 0, y: 1200 } },
        { id: 'check', nodeType: 'ifelse', conditionText: 'Done?', position: { x: 0, y: 1800 } },
        { id: 'end', nodeType: 'end', command: 'Bye', isLiteral: true, position: { x: 1200, y: 2400 } },
      ],
      edges: [
        edge('agent', 'output', 'start'),
        edge('start', 'output', 'talk'),
        edge('talk', 'output', 'check'),
        edge('check', 'true', 'end'),
        edge('check', 'false', 'talk'),
      ],
    };
    const agentId = (await http.post('/api/agents', { name: 'Loop drawing', flow })).body.id as string;
    const { page, problems } = await watchedPage(browser);
    await page.setViewportSize({ width: 900, height: 800 });
    await page.goto(`${stack.baseUrl}/console`);
    await page.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
    await page.selectOption('#agent', agentId);
    await page.locator('#flow .node[data-node-id="check"]').waitFor();
    // positions 600 px apart are scaled down, the labels are not: 14 px names on screen
    const nameHeight = await page
      .locator('#flow .node[data-node-id="check"] .name')
      .evaluate((t) => t.getBoundingClientRect().height);
    expect(nameHeight).toBeGreaterThanOrEqual(12);
    expect(await page.locator('#flow .edge-label').allTextContents()).toEqual(['true', 'false']);
    const loop = page.locator('#flow path.edge[data-source="talk"][data-target="check"]');
    const back = page.locator('#flow path.edge[data-source="check"][data-target="talk"]');
    const [d1, d2] = [await loop.getAttribute('d'), await back.getAttribute('d')];
    expect(d1).toContain('Q');
    expect(d2).toContain('Q');
    expect(d1).not.toBe(d2);
    expect(await back.getAttribute('marker-end')).toBe('url(#arrow)');
    expect(await loop.getAttribute('marker-start')).toBeNull();
    // at 900 px nothing is cut off: every panel lies within the window's width
    for (const sel of ['.side', '.conversation', '.flow-panel', '.chart-panel', '#session-actions']) {
      const box = (await page.locator(sel).first().boundingBox())!;
      expect(box.x, sel).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width, sel).toBeLessThanOrEqual(900);
    }
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(900);
    await page.screenshot({ path: '/tmp/console-900.png', fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });

  // a stack of its own starts in it: set-up, bounded as a hook is (vitest.config.ts hookTimeout)
  it('is served with its own strict CSP, open while the API needs a token', async () => {
    const locked = await startStack({
      security: { apiTokens: ['console-test-token'] },
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
    });
    try {
      const html = await fetch(`${locked.baseUrl}/console`);
      expect(html.status).toBe(200);
      expect(html.headers.get('content-type')).toMatch(/^text\/html/);
      expect(html.headers.get('content-security-policy')).toBe(CSP);
      expect(html.headers.get('x-content-type-options')).toBe('nosniff');
      expect(await html.text()).toContain('<script type="module" src="/console/main.js">');
      // the same page at /console/
      expect((await fetch(`${locked.baseUrl}/console/`)).headers.get('content-security-policy')).toBe(CSP);
      for (const [file, type] of [
        ['main.js', /^text\/javascript/],
        ['panels/talk.js', /^text\/javascript/],
        // the SSE parser the page reads a streamed turn with: eventsource-parser's own browser modules
        ['lib/vendor/eventsource-parser/stream.js', /^text\/javascript/],
        ['lib/vendor/eventsource-parser/index.js', /^text\/javascript/],
        ['console.css', /^text\/css/],
      ] as const) {
        const res = await fetch(`${locked.baseUrl}/console/${file}`);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(type);
        expect(res.headers.get('content-security-policy')).toBe(CSP);
      }
      // nothing else: not a file that is not there, nor the type checker's files
      for (const file of ['nothing-here', 'tsconfig.json', 'lib/vendor/eventsource-parser/stream.d.ts'])
        expect((await fetch(`${locked.baseUrl}/console/${file}`)).status, file).toBe(404);
      expect((await fetch(`${locked.baseUrl}/api/agents`)).status).toBe(401);

      // the page asks for the token when the API answers 401, and its calls then carry it
      const bearer = { authorization: 'Bearer console-test-token' };
      const created = await api(locked.baseUrl).post('/api/agents', { name: 'Locked' }, bearer);
      expect(created.status).toBe(201);
      const { page, problems } = await watchedPage(browser);
      await page.goto(`${locked.baseUrl}/console`);
      await page.locator('#auth[open]').waitFor();
      await page.fill('#token', 'wrong-token');
      await page.click('#auth button[type="submit"]');
      await page.locator('#auth-error').waitFor({ state: 'visible' });
      await page.fill('#token', 'console-test-token');
      await page.click('#auth button[type="submit"]');
      await page.locator(`#agent option[value="${created.body.id}"]`).waitFor({ state: 'attached' });
      expect(await page.locator('#auth[open]').count()).toBe(0);
      // the browser reports each refused call; nothing else may go wrong
      expect(problems.filter((p) => !p.includes('status of 401'))).toEqual([]);
      expect(problems.length).toBe(2);
      await page.close();
    } finally {
      await locked.close();
    }
  }, 120_000);
});

/**
 * The page against a scripted events stream (a local route, no stack): every event kind is shown, a stream
 * that drops mid-session is resumed from the last event with nothing twice, and with a token each stream
 * opens with a ticket of its own (POST /api/tickets).
 */
describe('the console with a scripted stream', () => {
  const agent = { id: 'agent-1', name: 'Scripted', createdAt: 1, updatedAt: 1 };
  const at = Date.UTC(2026, 0, 1, 12);
  const flow = {
    nodes: [
      { id: 'agent', nodeType: 'agent', name: 'Front desk', position: { x: 0, y: 0 } },
      { id: 'greet', nodeType: 'start', name: 'Greeting', position: { x: 0, y: 90 } },
      { id: 'route', nodeType: 'categorize', name: 'Why they call', position: { x: 0, y: 180 } },
      { id: 'bye', nodeType: 'end', name: 'Goodbye', position: { x: 200, y: 270 } },
    ],
    edges: [
      edge('agent', 'output', 'greet'),
      edge('greet', 'output', 'route'),
      edge('route', 'cat_0', 'bye'),
    ],
  };
  const base = { sessionId: 'session-1', agentId: agent.id };
  const payloads: SessionEventInput[] = [
    { type: 'session_started', sessionType: 'voice', version: 2 },
    { type: 'step_entered', stepId: 'greet', stepType: 'start' },
    { type: 'agent_reply_delta', replyId: 'r1', delta: 'Hello, ', stepId: 'greet' },
    { type: 'agent_reply_delta', replyId: 'r1', delta: 'front desk.', stepId: 'greet' },
    { type: 'agent_reply', replyId: 'r1', text: 'Hello, front desk.', stepId: 'greet' },
    { type: 'user_turn', text: 'I need', final: false, stepId: 'greet' },
    { type: 'user_turn', text: 'I need a room', final: true, stepId: 'greet' },
    { type: 'step_entered', stepId: 'route', stepType: 'categorize' },
    {
      type: 'tool_called',
      callId: 'c1',
      name: 'lookup_rooms',
      source: 'mcp',
      arguments: { n: 1 },
      stepId: 'route',
    },
    {
      type: 'tool_result',
      callId: 'c1',
      name: 'lookup_rooms',
      source: 'mcp',
      result: '3 free',
      durationMs: 42,
      stepId: 'route',
    },
    { type: 'branch_decided', stepId: 'route', exit: 'cat_0', attempt: 1 },
    { type: 'step_entered', stepId: 'bye', stepType: 'end' },
    { type: 'agent_reply', replyId: 'r2', text: 'Three rooms are free. Goodbye!', stepId: 'bye' },
    { type: 'turn_metrics', stepId: 'bye', metrics: { e2eLatencyMs: 820, llmTtftMs: 310, ttsTtfbMs: 150 } },
    { type: 'transfer', targetAgentId: 'agent-2', ok: false, reason: 'missing' },
    { type: 'post_processing', stepId: 'bye', kind: 'webhook', ok: false, status: 500, error: 'bad gateway' },
    { type: 'error', code: 'LLM_ERROR', message: 'the model timed out once', stepId: 'bye' },
    {
      type: 'usage',
      usage: [
        { kind: 'llm', provider: 'openai', model: 'gpt-4o-mini', promptTokens: 120, completionTokens: 30 },
      ],
    },
    { type: 'session_ended', reason: 'ended', durationMs: 12_000 },
  ];
  // held to the contract: the page is tested on events the backend may send
  const events = payloads.map((p, i) => SessionEvent.parse({ ...p, ...base, id: i + 1, at: at + i }));
  const DROP_AFTER = 8;
  let app: import('fastify').FastifyInstance;
  let url: string;
  const resumedFrom: (string | undefined)[] = [];
  const TOKEN = 'scripted-token';
  /** The tickets the page asked for (with the bearer, for which path) and those its streams carried. */
  const minted: { auth: string | undefined; path: string; ticket: string }[] = [];
  const presented: (string | undefined)[] = [];

  beforeAll(async () => {
    const { default: Fastify } = await import('fastify');
    const { registerConsole } = await import('../../../services/gateway/src/console.js');
    const { registerLivePage } = await import('../../../services/gateway/src/live-page.js');
    const { serializerCompiler, validatorCompiler } = await import('fastify-type-provider-zod');
    app = Fastify();
    // the live page's routes declare zod schemas, compiled as the gateway compiles them
    app.setValidatorCompiler(validatorCompiler);
    app.setSerializerCompiler(serializerCompiler);
    await registerConsole(app);
    // the console's Talk imports the voice client the live page serves (/live/voice/); the page itself is not
    // asked for here, so nothing answers its bus question
    const noBus = {
      request: () => Promise.reject(new Error('no bus in the scripted console')),
    } as unknown as import('@vab/bus').BusClient;
    await registerLivePage(app, { bus: noBus, timeoutMs: 1000 });
    app.get('/api/agents', async () => [agent]);
    app.get('/api/agents/:id', async () => ({ ...agent, version: 2, flow }));
    app.get('/api/agents/:id/test-cases', async () => []);
    app.get('/api/agents/:id/test-runs', async () => []);
    // the Deploy, Keys for callers, Call analysis and Calls panels load theirs with the agent: none here
    app.get('/api/agents/:id/deploys', async () => []);
    app.get('/api/agents/:id/analysis', async () => ({
      enabled: false,
      summary: true,
      criteria: [],
      dataFields: [],
      model: null,
    }));
    app.get('/api/agents/:id/public-keys', async () => ({ keys: [] }));
    app.get('/api/agents/:id/credentials', async () => ({ apiKeys: {}, updatedAt: null }));
    app.get('/api/agents/:id/calls', async () => ({ calls: [], nextCursor: null }));
    app.get('/api/agents/:id/versions', async () => [
      { version: 1, createdAt: at, contentHash: 'a', sizeBytes: 1 },
      { version: 2, createdAt: at, contentHash: 'b', sizeBytes: 1 },
    ]);
    app.get('/api/agents/:id/versions/:v', async () => ({
      agentId: agent.id,
      version: 2,
      createdAt: at,
      contentHash: 'b',
      sizeBytes: 1,
      flow,
    }));
    app.get('/api/agents/:id/versions/:v/stats', async () => ({
      agentId: agent.id,
      version: 2,
      since: null,
      sessions: 1,
      turns: 1,
      errors: 1,
      usage: [],
      figures: { e2eLatencyMs: { count: 1, p50: 820, p90: 820, p99: 820, mean: 820, max: 820 } },
    }));
    const record = (id: string) => ({
      id,
      agentId: agent.id,
      startedAt: at,
      endedAt: at + 12_000,
      durationMs: 12_000,
      roomName: 'r',
      sessionType: 'voice',
      status: 'closed',
      version: 2,
      usage: [],
    });
    app.get('/api/agents/:id/test-sessions', async () => [record('session-2'), record('session-1')]);
    app.get('/api/agents/:id/test-sessions/:sessionId', async (req) =>
      record((req.params as { sessionId: string }).sessionId),
    );
    // session-2 was recorded by a client: a transcript and no events
    app.get('/api/agents/:id/test-sessions/:sessionId/messages', async () => [
      { role: 'assistant', content: 'Front desk, hello.', stepId: 'greet', timestamp: at },
      { role: 'user', content: 'A room, please', stepId: 'greet', timestamp: at + 1 },
      {
        role: 'assistant',
        content: 'Booked.',
        stepId: 'bye',
        timestamp: at + 2,
        metrics: { e2eLatencyMs: 640 },
      },
    ]);
    app.post('/api/tickets', async (req) => {
      const grant = { ticket: `ticket-${minted.length + 1}`, expiresAt: Date.now() + 30_000 };
      minted.push({ auth: req.headers.authorization, path: (req.body as { path: string }).path, ...grant });
      return grant;
    });
    app.get('/api/agents/:id/test-sessions/:sessionId/events', (req, reply) => {
      const q = req.query as { lastEventId?: string; ticket?: string };
      presented.push(q.ticket);
      const from = Number(req.headers['last-event-id'] ?? q.lastEventId ?? 0);
      const own = (req.params as { sessionId: string }).sessionId === 'session-1' ? events : [];
      resumedFrom.push((req.headers['last-event-id'] as string | undefined) ?? q.lastEventId);
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      reply.raw.write(': ping\n\n');
      // the first connection drops after a few events, as a restarting gateway would
      const upTo = from === 0 ? DROP_AFTER : own.length;
      const body = own
        .slice(from, upTo)
        .map((e) => `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`)
        .join('');
      // in uneven pieces: a message may arrive split anywhere
      for (let i = 0; i < body.length; i += 97) reply.raw.write(body.slice(i, i + 97));
      reply.raw.end();
    });
    url = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('shows every kind of event inline and resumes a dropped stream without a gap or a duplicate', async () => {
    const { page, problems } = await watchedPage(browser);
    // a token the page was given earlier in this tab: with tokens on, each stream it opens needs a ticket
    await page.addInitScript({ content: `sessionStorage.setItem('vab-console-token', '${TOKEN}');` });
    await page.goto(`${url}/console`);
    await page.locator('#agent option[value="agent-1"]').waitFor({ state: 'attached' });
    await page.selectOption('#agent', 'agent-1');
    await page.click('#sessions button[data-session-id="session-1"]');
    const log = page.locator('#log');
    await expect.poll(() => log.locator('li').last().textContent()).toMatch(/^Session ended/);
    expect(resumedFrom).toEqual([undefined, String(DROP_AFTER)]);
    const path = '/api/agents/agent-1/test-sessions/session-1/events';
    expect(minted.map((m) => [m.auth, m.path])).toEqual([
      [`Bearer ${TOKEN}`, path],
      [`Bearer ${TOKEN}`, path],
    ]);
    expect(presented).toEqual(minted.map((m) => m.ticket));
    expect(await log.locator('li').allTextContents()).toEqual([
      'Session started voice, version 2',
      'Step greet (start)',
      'Hello, front desk.',
      'I need a room',
      'Step route (categorize)',
      'Tool lookup_rooms called (mcp) with {"n":1}',
      'Tool lookup_rooms answered in 42 ms: 3 free',
      'Branch route → cat_0',
      'Step bye (end)',
      'Three rooms are free. Goodbye!',
      // a voice turn's figures, under it
      'Turn first audio 820 ms · LLM first token 310 ms · TTS first byte 150 ms',
      'Transfer to agent agent-2 failed (missing)',
      'Webhook failed (HTTP 500): bad gateway',
      'Error LLM_ERROR the model timed out once',
      'Session ended (ended) after 12.0 s',
    ]);
    expect(await page.locator('#flow .node.current').getAttribute('data-node-id')).toBe('bye');
    expect(await page.locator('#flow .node.visited').count()).toBe(2);
    // drawn again at another size, the flow still shows the steps passed
    // its size, as drawFlow sets it
    const drawnWidth = () => page.locator('#flow').getAttribute('style');
    const before = await drawnWidth();
    await page.setViewportSize({ width: 1000, height: 800 });
    await expect.poll(drawnWidth).not.toBe(before);
    expect(await page.locator('#flow .node.visited').count()).toBe(2);
    expect(await page.locator('#flow .node.current').getAttribute('data-node-id')).toBe('bye');
    await page.setViewportSize({ width: 1280, height: 800 });
    expect(await page.locator('#chart rect.bar-e2eLatencyMs').count()).toBe(1);
    expect(await page.locator('#chart rect.bar-llmTtftMs').count()).toBe(1);
    await expect.poll(() => page.locator('#stats').textContent()).toMatch(/End-to-end \(voice\) p50 820 ms/);
    expect(await page.locator('#usage').textContent()).toBe('Usage: gpt-4o-mini: 120 in / 30 out tokens');
    await page.screenshot({ path: '/tmp/console-scripted.png' });

    // a closed session with no events: its transcript instead
    await page.click('#sessions button[data-session-id="session-2"]');
    await expect
      .poll(() => log.locator('li').allTextContents())
      .toEqual([
        'Transcript no events were recorded for this session',
        'Front desk, hello.',
        'A room, please',
        'Booked.',
      ]);
    expect(await page.locator('#flow .node.current').getAttribute('data-node-id')).toBe('bye');
    expect(await page.locator('#chart rect.bar-e2eLatencyMs').count()).toBe(1);
    expect(problems).toEqual([]);
    await page.close();
  });
});
