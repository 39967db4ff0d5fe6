import { seededRandom } from '@vab/playground';
import {
  lastUserText,
  offersTool,
  orderFlow,
  startOpenAiStub,
  systemText,
  textOf,
  voiceFlow,
  type ChatReply,
  type ChatRequest,
} from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMcpServer } from '../../../services/playground/test/mcp-server.js';
import { finishedRun } from '../../helpers/runs.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

const KEY = 'sk-test-request-0123456789';
const SERVER_GROQ_KEY = 'gsk-server-key-must-stay-home';
const MCP_TOKEN = 'mcp-token';
const ASKS = 'Ask for the order number, then look the order up.';
const SKIPS = 'Help the caller.';

let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
let mcp: Awaited<ReturnType<typeof startMcpServer>>;
let stack: Stack;
let http: ReturnType<typeof api>;

/**
 * A seed whose first 10 draws (the attempts' own seeded generator: the stub's draws are the same every run) are
 * wrong (< 0.4) exactly 4 times: a 40 % error rate, fixed.
 */
const WRONG_SEED = (() => {
  for (let s = 1; ; s++) {
    const draw = seededRandom(s);
    if (Array.from({ length: 10 }, draw).filter((x) => x < 0.4).length === 4) return s;
  }
})();
let draw = seededRandom(WRONG_SEED);

/** The agent: asks for the order number when its instructions say so, looks it up, answers from the tool. */
function agent(req: ChatRequest): ChatReply {
  const sys = systemText(req);
  const last = req.messages.at(-1);
  if (last?.role === 'tool') {
    const wrong = sys.includes('SEEDED') && draw() < 0.4;
    return { content: wrong ? 'Your order ships on Friday.' : `Your order: ${textOf(last.content)}` };
  }
  const number = /\d{3,}/.exec(lastUserText(req))?.[0];
  if (number && offersTool(req, 'lookup_order')) {
    return { toolCalls: [{ name: 'lookup_order', args: { orderId: number } }] };
  }
  if (sys.includes(ASKS)) return { content: 'Sure. What is your order number?' };
  return { content: 'I can help with anything.' };
}

/** The simulated caller, scripted by its persona. */
function caller(req: ChatRequest): ChatReply {
  const persona = systemText(req);
  const own = req.messages.filter((m) => m.role === 'assistant').length;
  const heard = textOf(req.messages.at(-1)?.content);
  const end = (outcome: string) => ({ toolCalls: [{ name: 'end_call', args: { outcome } }] });
  if (persona.includes('never hangs up')) return { content: `Tell me more (${own + 1}).` };
  if (heard.includes('ships')) return end('goal_reached');
  if (heard.toLowerCase().includes('order number')) return { content: 'It is 1234.' };
  if (own >= 3) return end('gave_up');
  return { content: 'Where is my order?' };
}

/** The judge: reads the numbered transcript it was given. */
function judge(req: ChatRequest): ChatReply {
  const prompt = textOf(req.messages.at(-1)?.content);
  const criterion = prompt.slice(prompt.lastIndexOf('Criterion "'));
  const turns = prompt.split('\n').filter((l) => l.startsWith('Turn '));
  const verdict = (args: Record<string, unknown>) => ({ toolCalls: [{ name: 'verdict', args }] });
  if (criterion.includes('asks for the order number')) {
    const at = turns.findIndex((l) => /Agent: .*order number\?/.test(l));
    return at >= 0
      ? verdict({ passed: true, reason: 'The agent asks for the order number.', turn: at + 1 })
      : verdict({ passed: false, reason: 'The agent never asks for the order number.', turn: null });
  }
  if (criterion.includes('right ship date')) {
    const at = turns.findIndex((l) => l.includes('ships on'));
    const wrong = turns[at]?.includes('Friday') ?? true;
    return verdict({ passed: !wrong, reason: wrong ? 'It says Friday.' : 'It says Tuesday.', turn: at + 1 });
  }
  return verdict({ verdict: 'maybe' });
}

function script(req: ChatRequest): ChatReply {
  if (offersTool(req, 'end_call')) return caller(req);
  if (offersTool(req, 'verdict')) return judge(req);
  if (offersTool(req, 'propose_cases')) {
    const cases = Array.from({ length: 5 }, (_, i) => ({
      name: `case ${i + 1}`,
      simulation: { persona: 'A caller', goal: 'Track an order', maxTurns: 6 },
      criteria: [{ name: 'polite', description: 'The agent stays polite.' }],
    }));
    return { toolCalls: [{ name: 'propose_cases', args: { cases } }] };
  }
  return agent(req);
}

const orderFlowOf = (instructions: string) =>
  orderFlow({ modelURL: stub.baseURL, instructions, mcp: { url: mcp.url, token: MCP_TOKEN } });

beforeAll(async () => {
  stub = await startOpenAiStub(script);
  mcp = await startMcpServer({ transport: 'streamable', token: MCP_TOKEN });
  stack = await startStack({
    // a heartbeat well above a loaded machine's timer delays: the sweep must never take a live run for dead
    testRuns: { caseTimeoutMs: 15_000, attempts: 1, heartbeatMs: 2000 },
    providerEnv: { GROQ_API_KEY: SERVER_GROQ_KEY },
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack?.close();
  await mcp?.close();
  await stub?.close();
});

async function newAgent(name: string, instructions: string) {
  const res = await http.post('/api/agents', { name, flow: orderFlowOf(instructions) });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

async function run(agentId: string, body: object = {}) {
  const started = await http.post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: KEY }, ...body });
  expect(started.status).toBe(202);
  return finishedRun(http, agentId, started.body.id, 60_000);
}

const orderCase = {
  name: 'tracks an order',
  simulation: {
    persona: 'A customer with order 1234 who gives the number only when asked.',
    goal: 'Learn when order 1234 ships.',
    maxTurns: 8,
  },
  mocks: { tools: { lookup_order: { result: 'Order 1234 ships on Tuesday (mocked).' } } },
  criteria: [{ name: 'asks for the order number', description: 'The agent asks for the order number.' }],
};

describe('simulated test cases', () => {
  it('judges a simulated caller; a flow that stops asking for the order number fails, with a reason', async () => {
    const agentId = await newAgent('Orders', ASKS);
    const created = await http.post(`/api/agents/${agentId}/test-cases`, orderCase);
    expect(created.status).toBe(201);
    // stored as sent, with the defaults of what was not
    expect(created.body).toMatchObject({
      ...orderCase,
      turns: [],
      repeat: 1,
      minPassRate: 1,
      judgeModel: null,
    });
    expect((await http.get(`/api/agents/${agentId}/test-cases/${created.body.id}`)).body).toEqual(
      created.body,
    );
    // a front end that saves the whole case back (read-only fields, null and empty ones included) may
    const { id: _id, ...whole } = created.body;
    const copy = await http.post(`/api/agents/${agentId}/test-cases`, { ...whole, name: 'copy' });
    expect(copy.status).toBe(201);
    expect(copy.body).toMatchObject({ ...orderCase, name: 'copy', turns: [], judgeModel: null });
    const saved = await http.patch(`/api/agents/${agentId}/test-cases/${copy.body.id}`, {
      ...copy.body,
      repeat: 2,
    });
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({ simulation: orderCase.simulation, turns: [], repeat: 2 });
    await http.delete(`/api/agents/${agentId}/test-cases/${copy.body.id}`);

    const good = await run(agentId);
    expect(good.status, JSON.stringify(good.cases[0].repeats)).toBe('passed');
    const [c] = good.cases;
    expect(c).toMatchObject({ verdict: 'passed', passRate: 1, minPassRate: 1 });
    expect(c.observed).toMatchObject({
      endedBy: 'goal_reached',
      userTurns: ['Where is my order?', 'It is 1234.'],
      judgements: [{ criterion: 'asks for the order number', passed: true, turn: 3 }],
      error: null,
    });
    // the mock reached the model as the tool's answer; the real MCP server heard nothing at all
    expect(c.observed.replies.at(-1)[0]).toContain('Order 1234 ships on Tuesday (mocked).');
    expect(mcp.requests.count).toBe(0);
    expect(mcp.calls).toEqual([]);
    // the attempt's transcript is a test session: turn 3 (the greeting, the caller, then) the agent asking
    const messages = (await http.get(`/api/agents/${agentId}/test-sessions/${c.observed.sessionId}/messages`))
      .body;
    expect(messages[2]).toMatchObject({ role: 'assistant', content: 'Sure. What is your order number?' });
    // tokens by role: the agent's, the simulated caller's and the judge's (named as LiveKit names models)
    for (const role of ['agent', 'simulator', 'judge']) {
      expect(good.usage[role]).toHaveLength(1);
      expect(good.usage[role][0]).toMatchObject({ kind: 'llm', model: 'stub' });
      expect(good.usage[role][0].promptTokens).toBeGreaterThan(0);
    }
    expect(good.usage.simulator[0].provider).toBe(good.usage.agent[0].provider);

    // a flow change: the agent no longer asks
    const flow = orderFlowOf(SKIPS);
    expect((await http.patch(`/api/agents/${agentId}`, { flow })).status).toBe(200);
    const bad = await run(agentId);
    expect(bad).toMatchObject({ status: 'failed', version: 2 });
    expect(bad.cases[0]).toMatchObject({ verdict: 'failed', passRate: 0 });
    expect(bad.cases[0].observed.endedBy).toBe('gave_up');
    expect(bad.cases[0].failures).toEqual([
      {
        expectation: 'criterion',
        expected: 'asks for the order number',
        actual: {
          criterion: 'asks for the order number',
          passed: false,
          reason: 'The agent never asks for the order number.',
          turn: null,
        },
        message: 'asks for the order number: The agent never asks for the order number.',
      },
    ]);
    expect(bad.sinceLastPass).toMatchObject({ runId: good.id, version: 1 });
  });

  it('repeats a case: an agent wrong 40 % of the time passes 0.6 of attempts and fails a 0.8 gate', async () => {
    draw = seededRandom(WRONG_SEED);
    const agentId = await newAgent('Flaky', `${ASKS} SEEDED`);
    const created = await http.post(`/api/agents/${agentId}/test-cases`, {
      ...orderCase,
      name: 'gives the right date',
      criteria: [{ name: 'right ship date', description: 'The agent gives the ship date the tool gave.' }],
      repeat: 10,
      minPassRate: 0.8,
    });
    expect(created.status).toBe(201);
    const seen = stub.requests.length;
    const flaky = await run(agentId);
    expect(flaky.status).toBe('failed');
    const [c] = flaky.cases;
    expect(c).toMatchObject({ verdict: 'failed', passRate: 0.6, minPassRate: 0.8 });
    expect(c.repeats).toHaveLength(10);
    expect(c.repeats.filter((a: { verdict: string }) => a.verdict === 'passed')).toHaveLength(6);
    // every attempt is its own test session, and ran with a recorded seed the agent's model was sent
    const sessions = new Set(c.repeats.map((a: { observed: { sessionId: string } }) => a.observed.sessionId));
    expect(sessions.size).toBe(10);
    const sentSeeds = new Set(stub.requests.slice(seen).map((r) => (r as { seed?: number }).seed));
    for (const a of c.repeats) {
      expect(typeof a.observed.seed).toBe('number');
      expect(sentSeeds.has(a.observed.seed)).toBe(true);
    }
    const failed = c.repeats.find((a: { verdict: string }) => a.verdict === 'failed');
    expect(failed.failures[0].message).toContain('It says Friday.');

    // the deploy gate uses the run's verdict
    await http.put(`/api/agents/${agentId}/deploy-gate`, { enabled: true });
    const d = (await http.post(`/api/agents/${agentId}/deploys`, {})).body;
    await http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'building' });
    const refused = await http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'live' });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('TESTS_NOT_PASSED');

    // the same agent against a 0.6 gate passes, and may go live
    draw = seededRandom(WRONG_SEED);
    await http.patch(`/api/agents/${agentId}/test-cases/${created.body.id}`, { minPassRate: 0.6 });
    const enough = await run(agentId);
    expect(enough.status).toBe('passed');
    expect(enough.cases[0]).toMatchObject({ verdict: 'passed', passRate: 0.6 });
    expect((await http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'live' })).status).toBe(200);
  });

  it('stops a simulator that never ends at maxTurns; a judge answer that does not fit errors the attempt', async () => {
    const agentId = await newAgent('Chatty', ASKS);
    await http.post(`/api/agents/${agentId}/test-cases`, {
      name: 'never hangs up',
      simulation: { persona: 'A caller who never hangs up.', goal: 'Chat.', maxTurns: 4 },
    });
    await http.post(`/api/agents/${agentId}/test-cases`, {
      ...orderCase,
      name: 'garbled judge',
      criteria: [{ name: 'garbled', description: 'Anything.' }],
    });
    const r = await run(agentId);
    const [endless, garbled] = r.cases;
    expect(endless.verdict).toBe('passed');
    expect(endless.observed).toMatchObject({ endedBy: 'max_turns', ended: false });
    expect(endless.observed.userTurns).toEqual([
      'Tell me more (1).',
      'Tell me more (2).',
      'Tell me more (3).',
      'Tell me more (4).',
    ]);
    expect(garbled).toMatchObject({ verdict: 'errored', passRate: 0 });
    expect(garbled.repeats[0]).toMatchObject({ verdict: 'errored', raw: 'verdict({"verdict":"maybe"})' });
    expect(garbled.error).toContain('judge:');
    expect(r.status).toBe('errored');
  });

  it('holds the key rule and the egress policy for the simulator and judge models', async () => {
    const agentId = await newAgent('Guarded', ASKS);
    // the server has a groq key; a simulator pointed at another endpoint must not get it
    await http.post(`/api/agents/${agentId}/test-cases`, {
      ...orderCase,
      name: 'simulator elsewhere',
      simulation: { ...orderCase.simulation, model: { provider: 'groq', baseURL: stub.baseURL } },
    });
    await http.post(`/api/agents/${agentId}/test-cases`, {
      ...orderCase,
      name: 'judge inside',
      judgeModel: { provider: 'openai', baseURL: 'http://10.1.2.3/v1' },
    });
    await http.post(`/api/agents/${agentId}/test-cases`, {
      ...orderCase,
      name: 'judge unsupported',
      judgeModel: { provider: 'deepgram' },
    });
    const r = await run(agentId);
    const [keyless, inside, unsupported] = r.cases;
    // no key may go to the simulator's own endpoint: it runs keyless (a local model server needs none)
    expect(keyless.error ?? '').not.toContain('MISSING_CREDENTIALS');
    expect(stub.authorizations).toContain('Bearer no-key');
    expect(stub.authorizations).not.toContain(`Bearer ${SERVER_GROQ_KEY}`);
    expect(inside.verdict).toBe('errored');
    expect(inside.error).toMatch(/FLOW_INVALID.*judge: `baseURL`/);
    expect(unsupported.error).toMatch(/FLOW_INVALID.*judge: this server cannot run deepgram as LLM/);

    // with the caller's own key for that endpoint, the same simulator runs
    const seen = stub.requests.length;
    const ok = await run(agentId, {
      caseIds: [keyless.caseId],
      apiKeys: { openai: KEY, groq: 'gsk-callers-own' },
      // a recorded seed runs the attempt again the same way: every seeded model of it gets that seed
      seed: 4242,
    });
    expect(ok.status).toBe('passed');
    expect(stub.authorizations).toContain('Bearer gsk-callers-own');
    expect(ok.cases[0].observed.seed).toBe(4242);
    const calls = stub.requests.slice(seen) as (ChatRequest & { seed?: number })[];
    const callerCalls = calls.filter((r) => offersTool(r, 'end_call'));
    const agentCalls = calls.filter((r) => !offersTool(r, 'end_call') && !offersTool(r, 'verdict'));
    expect(callerCalls.length).toBeGreaterThan(0);
    expect(agentCalls.length).toBeGreaterThan(0);
    expect([...callerCalls, ...agentCalls].map((r) => r.seed)).toEqual(
      [...callerCalls, ...agentCalls].map(() => 4242),
    );
  });

  it('names the setting whose model has no key: the caller voice and ear, the simulator, the judge', async () => {
    // the flow's models all run keyless at a URL of its own; each case names one model at OpenAI itself,
    // which the server has no key for and the run sends none
    const flow = voiceFlow({ chatURL: stub.baseURL, speechURL: stub.baseURL });
    const created = await http.post('/api/agents', { name: 'Keyless clinic', flow });
    const agentId = created.body.id as string;
    const simulation = { persona: 'A patient.', goal: 'Book a visit.', maxTurns: 1 };
    const openai = { provider: 'openai' };
    for (const body of [
      { name: 'voice', simulation: { ...simulation, voice: { tts: openai } } },
      { name: 'ear', simulation: { ...simulation, voice: { stt: openai } } },
      { name: 'simulator', simulation: { ...simulation, model: openai } },
      { name: 'judge', turns: ['Hello'], judgeModel: openai, criteria: [{ name: 'c', description: 'd' }] },
    ]) {
      expect((await http.post(`/api/agents/${agentId}/test-cases`, body)).status).toBe(201);
    }
    const r = await run(agentId, { apiKeys: {} });
    const missing = (setting: string) =>
      `MISSING_CREDENTIALS: missing API key for openai (${setting}): send apiKeys.openai, or set OPENAI_API_KEY on the server`;
    expect(r.cases.map((c: { error: string | null }) => c.error)).toEqual([
      missing('simulation.voice.tts, the caller voice'),
      missing('simulation.voice.stt, the caller ear'),
      missing('simulation.model, the simulator'),
      missing('judgeModel, the judge'),
    ]);
  });

  it('refuses every bad simulated case with a 400 naming the field', async () => {
    const agentId = await newAgent('Strict', ASKS);
    const bad = async (body: object, path: string) => {
      const res = await http.post(`/api/agents/${agentId}/test-cases`, { ...orderCase, ...body });
      expect(res.status, path).toBe(400);
      expect(
        res.body.issues.map((i: { path: string }) => i.path),
        path,
      ).toContain(path);
    };
    const sim = orderCase.simulation;
    await bad({ simulation: { goal: sim.goal, maxTurns: 5 } }, 'body.simulation.persona');
    await bad({ simulation: { persona: sim.persona, maxTurns: 5 } }, 'body.simulation.goal');
    await bad({ simulation: { ...sim, maxTurns: 0 } }, 'body.simulation.maxTurns');
    await bad({ simulation: { ...sim, maxTurns: 31 } }, 'body.simulation.maxTurns');
    await bad({ repeat: 0 }, 'body.repeat');
    await bad({ repeat: 21 }, 'body.repeat');
    await bad({ minPassRate: 1.5 }, 'body.minPassRate');
    await bad({ minPassRate: -0.1 }, 'body.minPassRate');
    await bad({ criteria: [{ description: 'no name' }] }, 'body.criteria.0.name');
    await bad({ mocks: { tools: { refund_order: { result: 'ok' } } } }, 'body.mocks.tools.refund_order');
    await bad({ mocks: { webhooks: { hook: { status: 200 } } } }, 'body.mocks.webhooks.hook');
    await bad({ turns: ['Hi'] }, 'body.simulation');
    const c = await http.post(`/api/agents/${agentId}/test-cases`, orderCase);
    const patch = await http.patch(`/api/agents/${agentId}/test-cases/${c.body.id}`, { repeat: 50 });
    expect(patch.status).toBe(400);
    expect(patch.body.issues[0].path).toBe('body.repeat');

    for (const count of [0, 21]) {
      const res = await http.post(`/api/agents/${agentId}/test-cases/generate`, { count });
      expect(res.status).toBe(400);
      expect(res.body.issues[0].path).toBe('body.count');
    }
  });

  it('generates simulated cases from the flow, returned and not stored', async () => {
    const agentId = await newAgent('Generated', ASKS);
    const before = (await http.get(`/api/agents/${agentId}/test-cases`)).body.length;
    const res = await http.post(`/api/agents/${agentId}/test-cases/generate`, {
      count: 3,
      focus: 'callers who lost their order number',
      apiKeys: { openai: KEY },
    });
    expect(res.status).toBe(200);
    expect(res.body.cases).toHaveLength(3);
    expect(res.body.cases[0]).toEqual({
      name: 'case 1',
      simulation: { persona: 'A caller', goal: 'Track an order', maxTurns: 6 },
      criteria: [{ name: 'polite', description: 'The agent stays polite.' }],
    });
    const asked = stub.requests.filter((r) => offersTool(r, 'propose_cases')).at(-1)!;
    const prompt = textOf(asked.messages.at(-1)?.content);
    expect(prompt).toContain('talk (opentalk): Help with the order.');
    expect(prompt).toContain('Tools: lookup_order');
    expect(prompt).toContain('callers who lost their order number');
    expect((await http.get(`/api/agents/${agentId}/test-cases`)).body.length).toBe(before);
    // a proposal is a body the create endpoint accepts as it is
    expect((await http.post(`/api/agents/${agentId}/test-cases`, res.body.cases[0])).status).toBe(201);
  });
});
