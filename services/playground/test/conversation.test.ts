import { initializeLogger, voice } from '@livekit/agents';
import type { Flow, SessionEventInput, SessionMessage } from '@vab/contracts';
import { createServer } from 'node:http';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fullFlow, listenOnLoopback, withNode } from '@vab/testkit';
import { createEgressFetch } from '../src/egress/client.js';
import { EgressPolicy, parseAllowList } from '../src/egress/policy.js';
import { KeyRule } from '../src/models/provider-keys.js';
import { ModelFactory } from '../src/models/model-factory.js';
import { ReadinessCheck } from '../src/models/readiness.js';
import { FlowConversation, type TransferTarget } from '../src/conversation/conversation.js';
import { openFlowRuntime, type FlowRuntime } from '../src/conversation/flow-runtime.js';
import { TYPED } from '../src/conversation/conversation-mode.js';
import { runPostProcessing } from '../src/conversation/post-processing.js';
import { lastUserText, startOpenAiStub, systemText, textOf, type ChatRequest } from './openai-stub.js';

initializeLogger({ pretty: false, level: 'error' });
const log = pino({ level: 'silent' });
const policy = new EgressPolicy(parseAllowList('127.0.0.1'));
const egressFetch = createEgressFetch({ policy, timeoutMs: 5000, maxResponseBytes: 1 << 20, log });
const models = new ModelFactory(
  new ReadinessCheck({ policy, keys: new KeyRule([]), egressFetch, egressTimeoutMs: 5000 }),
);

/** The model, scripted: classifies and decides from what the user said, extracts fixed data, echoes otherwise. */
function script(req: ChatRequest) {
  const tools = (req.tools ?? []).map((t) => t.function.name);
  const prompt = textOf(req.messages.at(-1)?.content);
  if (tools.includes('decide')) {
    const userLines = prompt
      .toLowerCase()
      .split('\n')
      .filter((l) => l.startsWith('user:'));
    const said = userLines.join('\n');
    if (prompt.toLowerCase().includes('why do they call')) {
      if (said.includes('book')) return { toolCalls: [{ name: 'decide', args: { choice: 'booking' } }] };
      if (said.includes('question')) return { toolCalls: [{ name: 'decide', args: { choice: 'question' } }] };
      if (said.includes('colleague')) return { toolCalls: [{ name: 'decide', args: { choice: 'other' } }] };
      return { toolCalls: [{ name: 'decide', args: { choice: 'none yet' } }] };
    }
    const last = userLines.at(-1) ?? '';
    return { toolCalls: [{ name: 'decide', args: { choice: last.includes('yes') ? 'true' : 'false' } }] };
  }
  if (tools.includes('extract'))
    return { toolCalls: [{ name: 'extract', args: { name: 'Ada', urgent: false } }] };
  const instructions = systemText(req).split('\n').filter(Boolean).at(-1) ?? '';
  return { content: `(${instructions}) ${lastUserText(req)}`.trim() };
}

let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
let hookUrl: string;
const hookBodies: unknown[] = [];
let hookServer: ReturnType<typeof createServer>;

beforeAll(async () => {
  stub = await startOpenAiStub(script);
  hookServer = createServer((req, res) => {
    let b = '';
    req.on('data', (c) => (b += c));
    req.on('end', () => {
      hookBodies.push(JSON.parse(b));
      res.writeHead(204).end();
    });
  });
  hookUrl = `http://127.0.0.1:${await listenOnLoopback(hookServer)}/hook`;
});
afterAll(async () => {
  await stub.close();
  await new Promise<void>((r) => hookServer.close(() => r()));
});

/** The flow as a text session runs it: checked, its models pointed at `baseURL` with a request key. */
async function runtime(flow: Flow, baseURL = stub.baseURL): Promise<FlowRuntime> {
  const runnable = models.require(withNode(flow, 'llm', { baseURL }), 'text', {}, { openai: 'test' });
  return openFlowRuntime(runnable, { fetch: egressFetch, timeoutMs: 5000, log });
}

const clinic = () => withNode(fullFlow(), 'hook', { url: hookUrl, headers: { 'x-flow': 'clinic' } });

function conversation(
  flow: FlowRuntime,
  opts: { clock?: { t: number }; transfer?: () => Promise<TransferTarget> } = {},
) {
  const recorded: SessionMessage[] = [];
  const events: SessionEventInput[] = [];
  let ended = 0;
  const session = new voice.AgentSession({ turnHandling: { turnDetection: 'manual' } });
  const conv = new FlowConversation({
    flow,
    mode: TYPED,
    session,
    startSession: (agent) => session.start({ agent }),
    loadTransferTarget: async () => (opts.transfer ? opts.transfer() : { ok: false, reason: 'missing' }),
    record: (m) => recorded.push(m),
    emit: (e) => events.push(e),
    lastEventId: () => events.length,
    onEnded: () => ended++,
    postProcess: (steps, transcript, f) =>
      runPostProcessing(steps, transcript, (cfg) => f.llm(cfg ?? f.config.providers.llm), {
        fetch: egressFetch,
        webhookTimeoutMs: 2000,
        llmTimeoutMs: 5000,
        log,
        emit: (e) => events.push(e),
      }),
    log,
    now: opts.clock ? () => opts.clock!.t : undefined,
    branchTimeoutMs: 15_000,
  });
  return { conv, recorded, events, endedCount: () => ended };
}

describe('a whole flow, in text, against a scripted model over HTTP', () => {
  it('greets, runs a 2-round burst, classifies, goes through if/else, ends, extracts and posts the webhook', async () => {
    const { conv, recorded, events, endedCount } = conversation(await runtime(clinic()));
    const hello = await conv.start();
    expect(hello).toMatchObject({
      replies: ['Hello, this is the clinic.'],
      stepId: 'start',
      stepChanges: [{ stepId: 'start', stepType: 'start' }],
    });

    const t1 = await conv.userTurn('Hi there');
    expect(t1.stepChanges).toEqual([{ stepId: 'burst', stepType: 'burst' }]);
    expect(t1.replies[0]).toContain('Ask for their name and date of birth.');
    expect((await conv.userTurn('I am Ada')).stepId).toBe('burst');
    const t3 = await conv.userTurn('Born in 1815');
    expect(t3.stepChanges).toEqual([{ stepId: 'talk', stepType: 'opentalk' }]);

    const stay = await conv.userTurn('Well, hmm');
    expect(stay).toMatchObject({ stepId: 'talk', stepChanges: [] });
    expect(stay.replies).toHaveLength(1);

    const booking = await conv.userTurn('I would like to book an appointment');
    expect(booking.stepChanges.map((c) => c.stepId)).toEqual(['cat', 'ifelse', 'talk']); // "false": not confirmed yet
    const confirmed = await conv.userTurn('yes, Tuesday works');
    // the categorize asks again from opentalk → booking → ifelse → true → end
    expect(confirmed.stepChanges.map((c) => c.stepId)).toEqual(['cat', 'ifelse', 'end']);
    expect(confirmed.replies.at(-1)).toBe('Goodbye!');
    expect(confirmed.ended).toBe(true);
    expect(endedCount()).toBe(1);

    await conv.close();
    expect(hookBodies).toHaveLength(1);
    const hook = hookBodies[0] as {
      conversation: { role: string; content: string }[];
      structuredOutput: unknown;
    };
    expect(hook.structuredOutput).toEqual({ name: 'Ada', urgent: false });
    expect(hook.conversation[0]).toEqual({ role: 'assistant', content: 'Hello, this is the clinic.' });
    expect(hook.conversation.at(-1)).toEqual({ role: 'assistant', content: 'Goodbye!' });

    // every message recorded with the step that was current
    expect(recorded.map((m) => [m.role, m.stepId])).toEqual([
      ['assistant', 'start'],
      ['user', 'start'],
      ['assistant', 'burst'],
      ['user', 'burst'],
      ['assistant', 'burst'],
      ['user', 'burst'],
      ['assistant', 'talk'],
      ['user', 'talk'],
      ['assistant', 'talk'],
      ['user', 'talk'],
      ['assistant', 'talk'],
      ['user', 'talk'],
      ['assistant', 'end'],
    ]);
    // the same conversation as events: every step, decision, user turn, reply and outcome, in order
    const of = (type: string) => events.filter((e) => e.type === type) as Record<string, unknown>[];
    expect(of('step_entered').map((e) => e.stepId)).toEqual([
      'start',
      'burst',
      'talk',
      'cat',
      'ifelse',
      'talk',
      'cat',
      'ifelse',
      'end',
    ]);
    expect(of('branch_decided').map((e) => [e.stepId, e.exit])).toEqual([
      ['cat', 'stay'], // "Well, hmm": no category yet
      ['cat', '0'],
      ['ifelse', '1'],
      ['cat', '0'],
      ['ifelse', '0'],
    ]);
    expect(of('user_turn').map((e) => e.text)).toEqual([
      'Hi there',
      'I am Ada',
      'Born in 1815',
      'Well, hmm',
      'I would like to book an appointment',
      'yes, Tuesday works',
    ]);
    const replies = of('agent_reply');
    expect(replies.map((e) => e.text)).toEqual(
      recorded.filter((m) => m.role === 'assistant').map((m) => m.content),
    );
    // a streamed reply: its deltas, under the id its final text carries, add up to that text
    const generated = replies.find((e) => String(e.text).endsWith('Hi there'))!;
    const deltas = of('agent_reply_delta').filter((e) => e.replyId === generated.replyId);
    expect(deltas.map((e) => e.delta).join('')).toBe(generated.text);
    expect(of('post_processing').map((e) => [e.kind, e.ok])).toEqual([
      ['structured_output', true],
      ['webhook', true],
    ]);
    // every turn's figures: on its last agent message and in an event
    const figures = of('turn_metrics');
    expect(figures).toHaveLength(7);
    for (const f of figures) expect((f.metrics as { turnMs: number }).turnMs).toBeGreaterThanOrEqual(0);
    expect(recorded.filter((m) => m.metrics).length).toBe(7);
    expect(hello.lastEventId).toBeGreaterThan(0);

    // a turn after the end changes nothing
    expect(await conv.userTurn('hello?')).toMatchObject({ ended: true, replies: [], stepChanges: [] });
  });

  it('takes the question branch into a timer that moves on only after its duration', async () => {
    const clock = { t: 1_000_000 };
    const { conv } = conversation(await runtime(clinic()), { clock });
    await conv.start();
    for (const text of ['Hi', 'Ada', '1815']) await conv.userTurn(text);
    const q = await conv.userTurn('I have a question about parking');
    expect(q.stepChanges.map((c) => c.stepId)).toEqual(['cat', 'timer']);
    clock.t += 30_000;
    expect((await conv.userTurn('Where do I park?')).stepId).toBe('timer');
    clock.t += 31_000;
    const after = await conv.userTurn('Thanks');
    expect(after.stepChanges.map((c) => c.stepId)).toEqual(['end']);
    expect(after.ended).toBe(true);
    await conv.close();
  });

  it('a transfer to a missing agent apologizes and ends; to a stored agent it continues with its flow', async () => {
    const failed = conversation(await runtime(clinic()));
    await failed.conv.start();
    for (const text of ['Hi', 'Ada', '1815']) await failed.conv.userTurn(text);
    const t = await failed.conv.userTurn('Please put me through to a colleague');
    expect(t.stepChanges.map((c) => c.stepId)).toEqual(['cat', 'transfer']);
    expect(t.ended).toBe(true);
    expect(t.replies).toHaveLength(1);
    await failed.conv.close();

    const frontDesk = withNode(withNode(fullFlow(), 'start', { command: 'Front desk here.' }), 'agent', {
      instructions: 'You are the front desk.',
    });
    const moved = conversation(await runtime(clinic()), {
      transfer: async () => ({
        ok: true,
        flow: await runtime(withNode(frontDesk, 'llm', { model: 'front-desk-model' })),
      }),
    });
    await moved.conv.start();
    for (const text of ['Hi', 'Ada', '1815']) await moved.conv.userTurn(text);
    const handed = await moved.conv.userTurn('Please put me through to a colleague');
    expect(handed.stepChanges.map((c) => c.stepId)).toEqual(['cat', 'transfer', 'start']);
    expect(handed.replies.at(-1)).toBe('Front desk here.');
    expect(handed.ended).toBe(false);
    // the target's own model answers from now on, under the target's instructions
    const after = await moved.conv.userTurn('Hello front desk');
    expect(after.stepId).toBe('burst');
    const last = stub.requests.at(-1)!;
    expect(last.model).toBe('front-desk-model');
    expect(systemText(last)).toContain('You are the front desk.');
    expect(systemText(last)).not.toContain('You book appointments.');
    await moved.conv.close();
  });

  it('a failing model during a branch keeps the conversation alive', async () => {
    const broken = await startOpenAiStub((req) =>
      (req.tools ?? []).length > 0 ? { status: 500 } : script(req),
    );
    const { conv } = conversation(await runtime(clinic(), broken.baseURL));
    try {
      await conv.start();
      for (const text of ['Hi', 'Ada', '1815']) await conv.userTurn(text);
      const t = await conv.userTurn('I would like to book');
      expect(t).toMatchObject({ stepId: 'talk', ended: false, stepChanges: [] });
      expect(t.replies).toHaveLength(1);
    } finally {
      await conv.close();
      await broken.close();
    }
  }, 60_000);
});
