import { VoiceCloseCodes, type Flow } from '@vab/contracts';
import {
  lastUserText,
  speak,
  textOf,
  VoiceClient,
  withEdge,
  withNode,
  withoutNode,
  type ChatRequest,
} from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { api, Stack } from '../../helpers/stack.js';
import { scriptedHearing, startVoiceStack, type VoiceStack } from '../../helpers/voice.js';

/**
 * Preemptive generation on real audio: LiveKit starts the model on the caller's final transcript, before the
 * end of the turn is confirmed. A turn the step only answers takes that very reply (one model request); a turn
 * that moves the flow on is the step engine's (its own request, under the next step's instructions).
 */

const KEY = 'sk-preemptive-test-key-0123456789';
const FIRST = 'I would like to book an appointment';
const SECOND = 'On Tuesday morning please';

let voice: VoiceStack;
let stack: Stack;
let http: ReturnType<typeof api>;
const hearing = scriptedHearing();

const system = (req: ChatRequest) => textOf(req.messages.find((m) => m.role === 'system')?.content);

/** The turn on which the model completes the opentalk step (its `complete_step` tool), saying `afterIt`. */
let completesOn: string | undefined;
const GOODBYE = 'Goodbye, see you on Tuesday.';
let afterIt = GOODBYE;

beforeAll(async () => {
  voice = await startVoiceStack({
    chat: (req) => {
      const last = req.messages.at(-1);
      if (last?.role === 'tool') return { content: afterIt };
      const offered = req.tools?.some((t) => t.function.name === 'complete_step');
      if (completesOn !== undefined && lastUserText(req) === completesOn && offered && last?.role === 'user')
        return { toolCalls: [{ name: 'complete_step', args: {} }] };
      return { content: `ok: ${lastUserText(req)}` };
    },
    transcribe: hearing.transcribe,
  });
  ({ stack, http } = voice);
});
afterAll(async () => {
  await voice?.close();
});

/**
 * Two spoken turns: the first leaves the greeting for the opentalk step, the second is answered in it.
 * `then`: how many more segments the agent says by itself after that answer (a transfer target's greeting).
 * `ends`: the flow reaches an end step, so the session ends by itself (however long that takes on a busy machine).
 */
async function talk(flow: Flow, { then = 0, ends = false }: { then?: number; ends?: boolean } = {}) {
  hearing.willHear(FIRST, SECOND);
  const chatFrom = voice.chat.requests.length;
  const agent = await http.post('/api/agents', { name: 'Preemptive', flow });
  expect(agent.status).toBe(201);
  const agentId = agent.body.id as string;
  const started = await http.post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const { sessionId, audioPath } = started.body as { sessionId: string; audioPath: string };
  const client = new VoiceClient({ url: stack.baseUrl.replace(/^http/, 'ws') + audioPath });
  await client.ready;
  await vi.waitFor(() => expect(client.segments.length).toBe(1), { timeout: 20_000 }); // the greeting
  for (const [i, text] of [FIRST, SECOND].entries()) {
    client.say(speak(text));
    // its answer has played out before the caller speaks again
    await vi.waitFor(() => expect(client.segments.length).toBe(i + 2), { timeout: 20_000 });
    await vi.waitFor(() => expect(client.micQueuedMs).toBe(0), { timeout: 20_000 });
    await vi.waitFor(() => expect(client.playing).toBe(false), { timeout: 20_000 });
  }
  if (then > 0) {
    await vi.waitFor(() => expect(client.segments.length).toBe(3 + then), { timeout: 20_000 });
    await vi.waitFor(() => expect(client.playing).toBe(false), { timeout: 20_000 });
  }
  // an end step reached ends the session by itself; otherwise nothing ends it within 3 s (a check of absence,
  // so a fixed wait) and the caller hangs up
  const ended =
    ends ||
    (await Promise.race([
      client.closed.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 3000)),
    ]));
  if (!ended) client.send({ type: 'end' });
  const closed = await client.closed;
  if (!ended) expect(closed.code).toBe(1000);
  const messages = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`);
  const said = (messages.body as { role: string; content: string; stepId: string }[]).map(
    ({ role, content, stepId }) => ({ role, content, stepId }),
  );
  const requests = voice.chat.requests.slice(chatFrom);
  const endedBy = client.events.find((e) => e.type === 'session_ended') as { reason?: string } | undefined;
  /** The model requests that answered `text` (preemptive ones included, used or not). */
  const requestsFor = (text: string) => requests.filter((r) => lastUserText(r) === text);
  return {
    said,
    requestsFor,
    endedBy: ended ? { code: closed.code, reason: endedBy?.reason } : undefined,
    events: client.events,
  };
}

describe('preemptive generation in a voice session', () => {
  it('answers a turn the step only answers with the reply it prepared: one model request, not two', async () => {
    const { said, requestsFor, endedBy } = await talk(voice.flow({ preemptiveGeneration: true }));
    expect(endedBy).toBeUndefined();
    expect(said).toEqual([
      { role: 'assistant', content: 'Hello, how can I help?', stepId: 'start' },
      { role: 'user', content: FIRST, stepId: 'start' },
      { role: 'assistant', content: `ok: ${FIRST}`, stepId: 'talk' },
      { role: 'user', content: SECOND, stepId: 'talk' },
      { role: 'assistant', content: `ok: ${SECOND}`, stepId: 'talk' },
    ]);
    // in the opentalk step: LiveKit's preemptive request is the one answer
    expect(requestsFor(SECOND)).toHaveLength(1);
    expect(system(requestsFor(SECOND)[0]!)).toContain('Help the caller.');
    // leaving the greeting is the step engine's: its reply is under the opentalk step's instructions (the
    // preemptive one, under the greeting's, was not used)
    const first = requestsFor(FIRST);
    expect(first.map(system).filter((s) => s.includes('Help the caller.'))).toHaveLength(1);
    expect(first.length).toBeGreaterThanOrEqual(1);
  }, 90_000);

  it('the model completes the step in a turn LiveKit answered: the end step it leads to ends the call', async () => {
    completesOn = SECOND;
    try {
      const { said, endedBy, requestsFor } = await talk(voice.flow({ preemptiveGeneration: true }), {
        ends: true,
      });
      // LiveKit answered it: its preemptive request (the tool call) and the one after the tool, no third
      expect(requestsFor(SECOND)).toHaveLength(2);
      expect(said.slice(3)).toEqual([
        { role: 'user', content: SECOND, stepId: 'talk' },
        { role: 'assistant', content: GOODBYE, stepId: 'end' },
      ]);
      expect(endedBy).toEqual({ code: VoiceCloseCodes.ended, reason: 'end step' });
    } finally {
      completesOn = undefined;
    }
  }, 90_000);

  it('the model completes the step in a turn LiveKit answered: the transfer it leads to follows that reply', async () => {
    const preemptive = () => voice.flow({ preemptiveGeneration: true });
    const target = await http.post('/api/agents', {
      name: 'Front desk',
      flow: withNode(preemptive(), 'start', { command: 'Front desk here.' }),
    });
    expect(target.status).toBe(201);
    const targetAgentId = target.body.id as string;
    const transfer = { id: 'transfer', nodeType: 'transfer', targetAgentId };
    const flow = withoutNode(preemptive(), 'end');
    completesOn = SECOND;
    afterIt = 'Let me put you through.';
    try {
      const { said, endedBy, events, requestsFor } = await talk(
        withEdge({ ...flow, nodes: [...flow.nodes, transfer] }, 'talk', 'output', 'transfer'),
        { then: 1 },
      );
      // LiveKit answered it: its preemptive request (the tool call) and the one after the tool, no third
      expect(requestsFor(SECOND)).toHaveLength(2);
      // the reply is spoken whole in the transfer step, then the target greets from its start step
      expect(said.slice(3)).toEqual([
        { role: 'user', content: SECOND, stepId: 'talk' },
        { role: 'assistant', content: 'Let me put you through.', stepId: 'transfer' },
        { role: 'assistant', content: 'Front desk here.', stepId: 'start' },
      ]);
      expect(events.filter((e) => e.type === 'transfer')).toEqual([
        expect.objectContaining({ targetAgentId, ok: true }),
      ]);
      // the caller hung up: the transfer did not end the call
      expect(endedBy).toBeUndefined();
    } finally {
      completesOn = undefined;
      afterIt = GOODBYE;
    }
  }, 90_000);

  it('off: the same conversation, each turn answered by one request made once the turn ended', async () => {
    const { said, requestsFor } = await talk(voice.flow({ preemptiveGeneration: false }));
    expect(said.map((m) => m.content)).toEqual([
      'Hello, how can I help?',
      FIRST,
      `ok: ${FIRST}`,
      SECOND,
      `ok: ${SECOND}`,
    ]);
    expect(requestsFor(FIRST)).toHaveLength(1);
    expect(requestsFor(SECOND)).toHaveLength(1);
  }, 90_000);
});
