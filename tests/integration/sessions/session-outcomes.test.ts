import { connect } from '@nats-io/transport-node';
import { eventsSubject, Subjects } from '@vab/contracts';
import { fullFlow, listenOnLoopback, withNode } from '@vab/testkit';
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clinicScript, startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';
import { eventsOf, readSse } from '../../helpers/sse.js';

/** Short, of no known shape: no pattern can tell it is a key. */
const SHORT_KEY = 'k3y-echo9';
const SERVER_KEY = 'srv-key-77';

let stack: Stack;
let http: ReturnType<typeof api>;
let echo: Awaited<ReturnType<typeof startOpenAiStub>>;
let clinic: Awaited<ReturnType<typeof startOpenAiStub>>;
let deadPort = 0;

beforeAll(async () => {
  // a provider that refuses the key and says it back, as one did to the attacker
  echo = await startOpenAiStub(() => ({
    status: 401,
    errorMessage: `invalid x-api-key header value "${SHORT_KEY}"`,
  }));
  clinic = await startOpenAiStub(clinicScript);
  const gone = createServer();
  deadPort = await listenOnLoopback(gone);
  await new Promise<void>((r) => gone.close(() => r()));
  // one slot: a session that holds it after its end step keeps every other start out
  stack = await startStack({
    providerEnv: { ANTHROPIC_API_KEY: SERVER_KEY },
    playground: { MAX_SESSIONS: 1, TEXT_SESSION_IDLE_MS: 600_000 },
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
  await echo.close();
  await clinic.close();
});

const flowAt = (baseURL: string) =>
  withNode(withNode(fullFlow(), 'llm', { baseURL, model: 'stub' }), 'hook', {
    url: 'http://127.0.0.1:9/unreachable',
  });

/** A stored agent, one text session with its greeting and one turn, ended; and everything it left behind. */
async function oneFailedTurn(baseURL: string, apiKey: string) {
  const agent = await http.post('/api/agents', { name: 'Failing', flow: flowAt(baseURL) });
  const agentId = agent.body.id as string;
  const started = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: apiKey } });
  expect(started.status).toBe(201);
  const sessionId = started.body.sessionId as string;
  const turn = await http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text: 'Hi' });
  await http.delete(`/api/agents/${agentId}/text-sessions/${sessionId}`);
  const events = eventsOf(
    await readSse(await fetch(`${stack.baseUrl}/api/agents/${agentId}/test-sessions/${sessionId}/events`)),
  );
  const messages = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`);
  const stats = await http.get(`/api/agents/${agentId}/versions/${agent.body.version as number}/stats`);
  return { agentId, sessionId, turn, events, messages: messages.body as unknown[], stats: stats.body };
}

describe('a model that fails a turn (issue 35 #12)', () => {
  it('an unreachable model: the turn says so, which node and which kind, no URL, no −1 figures, counted', async () => {
    const url = `http://127.0.0.1:${deadPort}/v1?token=secret-in-query`;
    const { turn, events, stats } = await oneFailedTurn(url, 'request-key-1');
    expect(turn.status).toBe(200);
    expect(turn.body.replies).toEqual([]);
    expect(turn.body.error).toEqual({
      nodeId: 'llm',
      modality: 'llm',
      kind: 'unreachable',
      message: 'the llm model could not be reached',
    });
    expect(turn.body.metrics.llmTtftMs).toBeUndefined();
    expect(JSON.stringify(turn.body)).not.toMatch(/-1\b/);
    const errors = events.filter((e) => e.type === 'error');
    expect(errors[0]).toMatchObject({ code: 'LLM_ERROR', nodeId: 'llm', kind: 'unreachable' });
    // the error says neither where (a port that answers differently is a scanner) nor the URL's query
    expect(JSON.stringify(errors)).not.toContain(String(deadPort));
    expect(JSON.stringify(events)).not.toContain('secret-in-query');
    expect(stats).toMatchObject({ sessions: 1, failedTurns: 1 });
  });
});

describe('a provider that echoes the key (issue 35 #2)', () => {
  it('the exact key is in no event, no reply, no stored message, no log line', async () => {
    const { turn, events, messages } = await oneFailedTurn(echo.baseURL, SHORT_KEY);
    expect(echo.authorizations).toContain(`Bearer ${SHORT_KEY}`); // the key was used
    expect(turn.body.error).toMatchObject({ nodeId: 'llm', kind: 'auth', status: 401 });
    expect(turn.body.error.message).toContain('[redacted]');
    const errors = events.filter((e) => e.type === 'error');
    expect(errors.length).toBeGreaterThan(0);
    expect(JSON.stringify(errors)).toContain('invalid x-api-key header value');
    const everything = JSON.stringify([turn.body, events, messages]) + stack.logs.join('\n');
    expect(everything).not.toContain(SHORT_KEY);
    expect(everything).not.toContain(SERVER_KEY);
  });
});

describe('the end step ends a text session (issue 35 #13)', () => {
  it('session_ended at once, the stream closes, the slot is free, the record and the event agree', async () => {
    const agent = await http.post('/api/agents', { name: 'Ends', flow: flowAt(clinic.baseURL) });
    const agentId = agent.body.id as string;
    const started = await http.post(`/api/agents/${agentId}/text-sessions`, {
      apiKeys: { openai: 'key-1234' },
    });
    const sessionId = started.body.sessionId as string;
    // the instant session_ended is published, a start is already offered to the instance: asked on the bus
    // (faster than any HTTP client), it is answered, not refused for want of a responder
    const nc = await connect({ servers: stack.natsUrl });
    const startOnEnd = new Promise<string>((resolve) => {
      nc.subscribe(eventsSubject(agentId, sessionId), {
        callback: (_err, msg) => {
          if ((msg.json() as { type: string }).type !== 'session_ended') return;
          nc.request(Subjects.textSessionStart, '{}', { timeout: 5_000 }).then(
            () => resolve('answered'),
            (err: Error) => resolve(err.message),
          );
        },
      });
    });
    let last;
    try {
      await nc.flush();
      for (const text of ['Hi', 'Ada', '1815', 'I want to book, yes please']) {
        last = await http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text });
      }
      expect(last!.body).toMatchObject({ ended: true, stepId: 'end' });
      expect(await startOnEnd).toBe('answered');
    } finally {
      await nc.close();
    }

    // no DELETE: the stream ends by itself, with the end step's session_ended
    const stream = await fetch(`${stack.baseUrl}/api/agents/${agentId}/test-sessions/${sessionId}/events`);
    const events = eventsOf(await readSse(stream, { timeoutMs: 5_000 }));
    const ended = events.at(-1)!;
    expect(ended).toMatchObject({ type: 'session_ended', reason: 'end step' });

    // the one slot is free again: another session starts
    const next = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: 'key-1234' } });
    expect(next.status).toBe(201);
    await http.delete(`/api/agents/${agentId}/text-sessions/${next.body.sessionId as string}`);

    const record = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`);
    expect(record.body).toMatchObject({ status: 'closed', durationMs: ended.durationMs });
    expect((await http.delete(`/api/agents/${agentId}/text-sessions/${sessionId}`)).body).toEqual({
      ok: true,
    });
    const after = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`);
    expect(after.body.durationMs).toBe(ended.durationMs);
    expect(after.body.endedAt).toBe(record.body.endedAt);
    const turn = await http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, {
      text: 'hello?',
    });
    expect(turn.status).toBe(404);
  });
});
