import type { Flow } from '@vab/contracts';
import { fullFlow, orderFlow, withEdge, withNode, withoutNode } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMcpServer } from '../../../services/playground/test/mcp-server.js';
import {
  lastUserText,
  startOpenAiStub,
  systemText,
  textOf,
  type ChatRequest,
} from '../../../services/playground/test/openai-stub.js';
import { eventsOf, readSse } from '../../helpers/sse.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

const KEY = 'sk-request-key-never-logged-0123';
const MCP_TOKEN = 'mcp-token-never-logged-0123';
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
let mcp: Awaited<ReturnType<typeof startMcpServer>>;
let legacy: Awaited<ReturnType<typeof startMcpServer>>;
let stack: Stack;
let http: ReturnType<typeof api>;

/** The user's line on which the model completes a free-talk step (its `complete_step` tool). */
const HAND_OVER = 'I would rather talk to the front desk';
const PUTTING_THROUGH = 'Putting you through to the front desk.';

/**
 * Classifies by what the user said; calls `lookup_order` when asked about order 42; says what a tool
 * answered; completes a free-talk step on `HAND_OVER`, then says it puts the user through.
 */
function script(req: ChatRequest) {
  const tools = (req.tools ?? []).map((t) => t.function.name);
  const prompt = textOf(req.messages.at(-1)?.content).toLowerCase();
  if (tools.includes('decide')) {
    const said = prompt
      .split('\n')
      .filter((l) => l.startsWith('user:'))
      .join(' ');
    if (prompt.includes('why do they call')) {
      const choice = said.includes('colleague') ? 'other' : said.includes('book') ? 'booking' : 'none yet';
      return { toolCalls: [{ name: 'decide', args: { choice } }] };
    }
    return { toolCalls: [{ name: 'decide', args: { choice: 'false' } }] };
  }
  const last = req.messages.at(-1);
  const user = lastUserText(req);
  if (user === HAND_OVER) {
    if (last?.role === 'tool') return { content: PUTTING_THROUGH };
    if (tools.includes('complete_step')) return { toolCalls: [{ name: 'complete_step', args: {} }] };
  }
  if (last?.role === 'tool') return { content: `Here is what I found: ${textOf(last.content)}` };
  if (user.includes('order 42') && tools.includes('lookup_order')) {
    return { toolCalls: [{ name: 'lookup_order', args: { orderId: '42' } }] };
  }
  return { content: `ok: ${user}` };
}

const withModel = (flow: Flow, model = 'stub') => withNode(flow, 'llm', { baseURL: stub.baseURL, model });

/** The flow with an MCP node on the agent's tools input. */
function withMcp(flow: Flow, serverUrl: string, token = MCP_TOKEN): Flow {
  const node = {
    id: 'orders',
    nodeType: 'mcp',
    serverUrl,
    authType: 'bearer',
    authValue: token,
    selectedTools: ['lookup_order'],
  };
  return withEdge({ ...flow, nodes: [...flow.nodes, node] }, 'orders', 'output', 'agent', 'tools_in');
}

/** The same graph with every node id prefixed: another agent's flow whose steps are told apart. */
function prefixed(flow: Flow, prefix: string): Flow {
  return {
    nodes: flow.nodes.map((n) => ({ ...n, id: prefix + n.id })),
    edges: flow.edges.map((e) => ({ ...e, source: prefix + e.source, target: prefix + e.target })),
  };
}

/** Another stored agent's flow, with its own model, instructions and greeting: a transfer's target. */
const frontDesk = () =>
  withNode(
    withNode(prefixed(withModel(fullFlow(), 'front-desk-model'), 'fd-'), 'fd-agent', {
      instructions: 'You are the front desk.',
    }),
    'fd-start',
    { command: 'Front desk here.' },
  );

/** Greeting → free talk → transfer: no branch follows the free talk, so the model ends it with its tool. */
function talkThenTransfer(targetAgentId: string): Flow {
  const flow = withoutNode(orderFlow({ modelURL: stub.baseURL }), 'end');
  const transfer = { id: 'transfer', nodeType: 'transfer', targetAgentId };
  return withEdge({ ...flow, nodes: [...flow.nodes, transfer] }, 'talk', 'output', 'transfer');
}

beforeAll(async () => {
  stub = await startOpenAiStub(script);
  mcp = await startMcpServer({ transport: 'streamable', token: MCP_TOKEN });
  legacy = await startMcpServer({ transport: 'sse', token: MCP_TOKEN });
  stack = await startStack({ playground: { MCP_TIMEOUT_MS: 2000 } });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
  await Promise.all([stub.close(), mcp.close(), legacy.close()]);
});

async function textSession(flow: Flow) {
  const agent = await http.post('/api/agents', { name: 'Shop', flow });
  expect(agent.status).toBe(201);
  const agentId = agent.body.id as string;
  const started = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
  expect(started.status).toBe(201);
  const sessionId = started.body.sessionId as string;
  return {
    agentId,
    sessionId,
    turn: (text: string) => http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text }),
    end: () => http.delete(`/api/agents/${agentId}/text-sessions/${sessionId}`),
  };
}

describe('MCP tools in a text session', () => {
  it.each([
    ['streamable HTTP', () => mcp],
    ['SSE (older servers)', () => legacy],
  ])('over %s: the model calls a selected tool and its result shapes the reply', async (_name, server) => {
    const s = await textSession(withMcp(withModel(fullFlow()), server().url));
    const before = server().calls.length;
    const res = await s.turn('Where is order 42?');
    expect(res.status).toBe(200);
    // LiveKit hands a tool's result to the model as JSON
    expect(res.body.replies.join(' ')).toContain('Here is what I found: "Order 42 ships on Tuesday."');
    expect(server().calls.slice(before)).toEqual([
      { tool: 'lookup_order', args: { orderId: '42' }, authorization: `Bearer ${MCP_TOKEN}` },
    ]);
    // only the selected tool was offered to the model
    const offered = stub.requests.filter((r) => r.tools?.some((t) => t.function.name === 'lookup_order'));
    expect(offered.length).toBeGreaterThan(0);
    for (const r of offered) expect(r.tools!.map((t) => t.function.name)).not.toContain('delete_everything');
    await s.end();
  });

  it('a dropped connection to an SSE server is made again by the next call', async () => {
    const s = await textSession(withMcp(withModel(fullFlow()), legacy.url));
    expect((await s.turn('Where is order 42?')).body.replies.join(' ')).toContain('Tuesday');
    legacy.dropConnections();
    const again = await s.turn('And where is order 42 now?');
    expect(again.body.replies.join(' ')).toContain('Tuesday');
    await s.end();
  });

  it.each([
    ['unreachable', 'http://127.0.0.1:9/mcp', MCP_TOKEN],
    ['refusing the credentials', '', 'wrong-token'],
  ])('a server %s is an error the model sees; the session goes on', async (_name, url, token) => {
    const s = await textSession(withMcp(withModel(fullFlow()), url || mcp.url, token));
    const res = await s.turn('Where is order 42?');
    expect(res.status).toBe(200);
    expect(res.body.replies.join(' ')).toContain(
      'Here is what I found: the tool lookup_order is unavailable',
    );
    const next = await s.turn('Never mind');
    expect(next.status).toBe(200);
    expect(next.body.replies).toEqual(['ok: Never mind']);
    await s.end();
  });

  it.each(['streamable', 'sse'] as const)(
    'a server (%s) answering more than the byte bound is an error the model sees; the session goes on',
    async (transport) => {
      const flood = await startMcpServer({ transport, token: MCP_TOKEN, resultChars: 5 * 1024 * 1024 });
      try {
        const s = await textSession(withMcp(withModel(fullFlow()), flood.url));
        const res = await s.turn('Where is order 42?');
        expect(res.status).toBe(200);
        expect(flood.calls.map((c) => c.tool)).toEqual(['lookup_order']);
        expect(res.body.replies.join(' ')).toContain(
          'Here is what I found: the tool lookup_order is unavailable',
        );
        const next = await s.turn('Never mind');
        expect(next.body.replies).toEqual(['ok: Never mind']);
        await s.end();
      } finally {
        await flood.close();
      }
    },
  );

  it('keeps the MCP credential out of logs, storage and answers', async () => {
    const redis = JSON.stringify(
      await Promise.all((await stack.redis.keys('ss:*')).map((k) => stack.redis.dump(k))),
    );
    expect(stack.logs.join('\n') + redis).not.toContain(MCP_TOKEN);
  });
});

/** What the model was told when it called `complete_step` after request `since` (LiveKit passes a tool's answer as JSON). */
function completeStepAnswer(since: number): string {
  const req = stub.requests
    .slice(since)
    .find((r) => r.messages.at(-1)?.role === 'tool' && lastUserText(r) === HAND_OVER);
  expect(req, 'the model heard back from complete_step').toBeDefined();
  return JSON.parse(textOf(req!.messages.at(-1)!.content)) as string;
}

describe('a free-talk step the model completes', () => {
  it("tells the model to say the end step's goodbye, since the rest of its reply is that goodbye", async () => {
    const s = await textSession(orderFlow({ modelURL: stub.baseURL }));
    expect((await s.turn('Hi')).body).toMatchObject({ stepId: 'talk' });
    const since = stub.requests.length;
    const done = await s.turn(HAND_OVER);
    // the reply that completed the step is the goodbye: nothing is said after it
    expect(done.body).toMatchObject({ stepId: 'end', ended: true, replies: [PUTTING_THROUGH] });
    expect(completeStepAnswer(since)).toBe(
      'Step complete. End the conversation with the rest of this reply, saying exactly: "Goodbye!"',
    );
  });

  it("gives the rest of the reply the next step's instructions, and the next reply its system prompt", async () => {
    const flow = orderFlow({ modelURL: stub.baseURL });
    const email = { id: 'email', nodeType: 'opentalk', command: 'Collect the email address.' };
    const talkToEmail = withEdge(
      withEdge(
        {
          nodes: [...flow.nodes, email],
          edges: flow.edges.filter((x) => !(x.source === 'talk' && x.target === 'end')),
        },
        'talk',
        'output',
        'email',
      ),
      'email',
      'output',
      'end',
    );
    const s = await textSession(talkToEmail);
    await s.turn('Hi');
    const since = stub.requests.length;
    expect((await s.turn(HAND_OVER)).body).toMatchObject({ stepId: 'email', ended: false });
    const answer = completeStepAnswer(since);
    expect(answer).toMatch(/^Step complete\. For the rest of this reply, follow these instructions:/);
    expect(answer).toContain('Collect the email address.');
    // once the reply is over, the step's instructions are the system prompt
    expect((await s.turn('It is ada@example.com')).body).toMatchObject({ stepId: 'email' });
    expect(systemText(stub.requests.at(-1)!)).toContain('Collect the email address.');
  });
});

describe('transfer in a text session', () => {
  it("continues with the target's own model, instructions and steps, and records them", async () => {
    const target = await http.post('/api/agents', { name: 'Front desk', flow: frontDesk() });
    const s = await textSession(
      withNode(withModel(fullFlow()), 'transfer', { targetAgentId: target.body.id }),
    );
    for (const text of ['Hi', 'Ada', '1815']) expect((await s.turn(text)).status).toBe(200);

    const handed = await s.turn('Please put me through to a colleague');
    expect(handed.body.stepChanges.map((c: { stepId: string }) => c.stepId)).toEqual([
      'cat',
      'transfer',
      'fd-start',
    ]);
    expect(handed.body.replies.at(-1)).toBe('Front desk here.');
    expect(handed.body.ended).toBe(false);

    const next = await s.turn('Hello front desk');
    expect(next.body).toMatchObject({ stepId: 'fd-burst', replies: ['ok: Hello front desk'] });
    const asked = stub.requests.at(-1)!;
    expect(asked.model).toBe('front-desk-model');
    expect(systemText(asked)).toContain('You are the front desk.');
    expect(systemText(asked)).not.toContain('You book appointments.');

    // the transcript is written behind the conversation; ending the session waits for all of it
    await s.end();
    const messages = await http.get(`/api/agents/${s.agentId}/test-sessions/${s.sessionId}/messages`);
    expect(
      messages.body.slice(-3).map((m: { role: string; stepId: string }) => `${m.role}@${m.stepId}`),
    ).toEqual(['assistant@fd-start', 'user@fd-start', 'assistant@fd-burst']);
  });

  it('reached by the model completing a free-talk step: the handover follows the reply that completed it', async () => {
    const target = await http.post('/api/agents', { name: 'Front desk', flow: frontDesk() });
    const targetAgentId = target.body.id as string;
    const s = await textSession(talkThenTransfer(targetAgentId));
    expect((await s.turn('Hi')).body).toMatchObject({ stepId: 'talk', replies: ['ok: Hi'] });

    const since = stub.requests.length;
    const handed = await s.turn(HAND_OVER);
    expect(handed.status).toBe(200);
    expect(handed.body.stepChanges.map((c: { stepId: string }) => c.stepId)).toEqual([
      'transfer',
      'fd-start',
    ]);
    expect(handed.body).toMatchObject({
      stepId: 'fd-start',
      ended: false,
      replies: [PUTTING_THROUGH, 'Front desk here.'],
    });

    expect(completeStepAnswer(since)).toContain('handed over to another agent once you finish this reply');

    const next = await s.turn('Hello front desk');
    expect(next.body).toMatchObject({ stepId: 'fd-burst', replies: ['ok: Hello front desk'] });
    expect(stub.requests.at(-1)!.model).toBe('front-desk-model');

    await s.end();
    const events = eventsOf(
      await readSse(
        await fetch(`${stack.baseUrl}/api/agents/${s.agentId}/test-sessions/${s.sessionId}/events`),
      ),
    );
    // the reply that completed the step was whole before the handover
    const said = events.findIndex((e) => e.type === 'agent_reply' && e.text === PUTTING_THROUGH);
    const transfer = events.findIndex((e) => e.type === 'transfer');
    expect(events[transfer]).toMatchObject({ type: 'transfer', targetAgentId, ok: true });
    expect(said).toBeGreaterThanOrEqual(0);
    expect(said).toBeLessThan(transfer);
    const messages = await http.get(`/api/agents/${s.agentId}/test-sessions/${s.sessionId}/messages`);
    expect(messages.body.map((m: { role: string; stepId: string }) => `${m.role}@${m.stepId}`)).toEqual([
      'assistant@start',
      'user@start',
      'assistant@talk',
      'user@talk',
      'assistant@transfer',
      'assistant@fd-start',
      'user@fd-start',
      'assistant@fd-burst',
    ]);
  });

  it('to an agent this server cannot run: the agent apologizes and the session ends', async () => {
    const target = await http.post('/api/agents', {
      name: 'Unrunnable',
      flow: withNode(withModel(fullFlow()), 'llm', { provider: 'acme' }),
    });
    const s = await textSession(
      withNode(withModel(fullFlow()), 'transfer', { targetAgentId: target.body.id }),
    );
    for (const text of ['Hi', 'Ada', '1815']) await s.turn(text);
    const failed = await s.turn('Please put me through to a colleague');
    expect(failed.body).toMatchObject({ stepId: 'transfer', ended: true });
    expect(failed.body.replies).toHaveLength(1);
    expect(stack.logs.join('\n')).toMatch(
      /transfer target cannot run here.*FLOW_INVALID|FLOW_INVALID.*transfer target cannot run here/,
    );
    await s.end();
  });
});
