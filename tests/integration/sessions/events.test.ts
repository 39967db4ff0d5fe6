import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { EVENTS_STREAM } from '@vab/contracts';
import { fullFlow, withNode } from '@vab/testkit';
import { connect as netConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  clinicScript,
  lastUserText,
  startOpenAiStub,
  type ChatReply,
} from '../../../services/playground/test/openai-stub.js';
import { eventsOf, readSse, type SseFrame } from '../../helpers/sse.js';
import { finishedRun } from '../../helpers/runs.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

const KEY = 'sk-test-never-in-events-0123456789';
/** What the model's replies look like to this test: words, streamed one by one; "slow" delays the first and the rest. */
let firstTokenDelayMs = 0;
let restDelayMs = 0;
let bigReply = '';
const script = (req: Parameters<typeof clinicScript>[0]): ChatReply => {
  const reply = clinicScript(req);
  if (reply.content?.startsWith('ok:')) {
    const said = lastUserText(req);
    if (said === 'big') return { content: bigReply };
    return { ...reply, wordByWord: true, ...(said === 'slow' ? { firstTokenDelayMs, restDelayMs } : {}) };
  }
  return reply;
};

let stack: Stack;
let http: ReturnType<typeof api>;
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;

beforeAll(async () => {
  stub = await startOpenAiStub(script);
  stack = await startStack({
    events: { heartbeatMs: 300, maxStreamsPerClient: 3, maxBufferBytes: 64 * 1024, feedBufferBytes: 4096 },
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
  await stub.close();
});

const flowFor = () =>
  withNode(withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }), 'hook', {
    url: 'http://127.0.0.1:9/unreachable',
  });

async function startSession(base = stack.baseUrl) {
  const agent = await http.post('/api/agents', { name: 'Clinic', flow: flowFor() });
  expect(agent.status).toBe(201);
  const agentId = agent.body.id as string;
  const started = await api(base).post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
  expect(started.status).toBe(201);
  const sessionId = started.body.sessionId as string;
  const turn = (text: string) =>
    http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text });
  const eventsUrl = (base2 = stack.baseUrl) =>
    `${base2}/api/agents/${agentId}/test-sessions/${sessionId}/events`;
  return { agentId, sessionId, turn, eventsUrl, greeting: started.body };
}

const ids = (events: { id: number }[]) => events.map((e) => e.id);
const consecutive = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('session events over SSE', () => {
  it('replays a finished session whole, in order, then ends; every kind of event is there', async () => {
    const s = await startSession();
    for (const text of ['Hi', 'Ada Lovelace is my name', '1815', 'I want to book, yes please']) {
      await s.turn(text);
    }
    expect((await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`)).status).toBe(200);

    const res = await fetch(s.eventsUrl());
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-request-id')).toBeTruthy();
    const events = eventsOf(await readSse(res));
    expect(ids(events)).toEqual(consecutive(1, events.length));
    expect(events[0]).toMatchObject({ type: 'session_started', sessionType: 'text', sessionId: s.sessionId });
    // the end step ended the session (the DELETE after it found nothing left to end)
    expect(events.at(-1)).toMatchObject({ type: 'session_ended', reason: 'end step' });
    const types = new Set(events.map((e) => e.type));
    // its usage is reported once
    expect(events.filter((e) => e.type === 'usage')).toHaveLength(1);
    for (const t of [
      'step_entered',
      'user_turn',
      'agent_reply_delta',
      'agent_reply',
      'branch_decided',
      'turn_metrics',
      'post_processing',
      'usage',
    ]) {
      expect(types, t).toContain(t);
    }
    // a webhook the flow cannot reach: reported, without its URL
    const hook = events.find((e) => e.type === 'post_processing' && e.kind === 'webhook')!;
    expect(hook).toMatchObject({ ok: false });
    expect(JSON.stringify(events)).not.toContain('unreachable');
    expect(JSON.stringify(events)).not.toContain(KEY);
    // the reply streamed word by word: its deltas add up to the final text
    const said = 'ok: Ada Lovelace is my name';
    const reply = events.find((e) => e.type === 'agent_reply' && e.text === said)!;
    const deltas = events.filter((e) => e.type === 'agent_reply_delta' && e.replyId === reply.replyId);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((d) => d.delta).join('')).toBe(said);
  });

  it('streams live, resumes after Last-Event-ID on another gateway with nothing lost or twice', async () => {
    const s = await startSession();
    const other = await stack.addGateway();
    const first = await fetch(s.eventsUrl());
    const seen = readSse(first, { stopWhen: (f) => f.event === 'agent_reply' && f.data.includes('ok: Hi') });
    await s.turn('Hi');
    const part1 = eventsOf(await seen);
    const last = part1.at(-1)!.id;
    await s.turn('Ada');
    // the first gateway goes away; the client comes back to another one with its Last-Event-ID
    const resumed = await fetch(s.eventsUrl(other.baseUrl), { headers: { 'last-event-id': String(last) } });
    expect(resumed.status).toBe(200);
    const rest = readSse(resumed);
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
    const part2 = eventsOf(await rest);
    expect(part2[0]!.id).toBe(last + 1);
    expect([...ids(part1), ...ids(part2)]).toEqual(consecutive(1, part2.at(-1)!.id));
    expect(part2.at(-1)!.type).toBe('session_ended');
    await other.close();
  });

  it('keeps a stream open across a gateway restart: the client resumes where it was', async () => {
    const s = await startSession();
    const gw = await stack.addGateway();
    const comments: string[] = [];
    const live: SseFrame[] = [];
    const reading = readSse(await fetch(s.eventsUrl(gw.baseUrl)), { comments, frames: live });
    await s.turn('Hi');
    await expect.poll(() => live.some((f) => f.event === 'agent_reply')).toBe(true);
    await gw.close(); // the stream ends with the gateway, saying so in a frame of its own (no id)
    const frames = await reading;
    expect(frames.at(-1)?.event).toBe('error');
    expect(frames.at(-1)?.id).toBeUndefined();
    expect(JSON.parse(frames.at(-1)!.data)).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
    const before = eventsOf(frames);
    expect(before.length).toBeGreaterThan(1);
    await s.turn('Ada');
    const again = await fetch(s.eventsUrl(), { headers: { 'last-event-id': String(before.at(-1)!.id) } });
    const after = readSse(again, {
      stopWhen: (f) => f.event === 'agent_reply' && f.data.includes('ok: Ada'),
    });
    const resumed = eventsOf(await after);
    expect([...ids(before), ...ids(resumed)]).toEqual(consecutive(1, resumed.at(-1)!.id));
  });

  it('answers 404 before any stream for an unknown agent or session, or a session of another agent', async () => {
    const s = await startSession();
    const otherAgent = (await http.post('/api/agents', { name: 'Other', flow: flowFor() })).body.id as string;
    const unknownSession = await fetch(`${stack.baseUrl}/api/agents/${s.agentId}/test-sessions/nope/events`);
    expect(unknownSession.status).toBe(404);
    expect(await unknownSession.json()).toMatchObject({ code: 'NOT_FOUND' });
    const wrongAgent = await fetch(
      `${stack.baseUrl}/api/agents/${otherAgent}/test-sessions/${s.sessionId}/events`,
    );
    expect(wrongAgent.status).toBe(404);
    const unknownAgent = await fetch(`${stack.baseUrl}/api/agents/ghost/test-sessions/${s.sessionId}/events`);
    expect(unknownAgent.status).toBe(404);
    for (const bad of ['abc', '-1', '1.5', '1e3']) {
      const res = await fetch(s.eventsUrl(), { headers: { 'last-event-id': bad } });
      expect(res.status, bad).toBe(400);
      expect(await res.json()).toMatchObject({ code: 'VALIDATION_FAILED' });
    }
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
  });

  it('goes on from the live edge when Last-Event-ID is past the last event', async () => {
    const s = await startSession();
    const res = await fetch(s.eventsUrl(), { headers: { 'last-event-id': '999999' } });
    expect(res.status).toBe(200);
    const reading = readSse(res, { stopWhen: (f) => f.event === 'agent_reply' });
    // no wait: the gateway answers 200 only once the stream's consumer is placed at the live edge
    await s.turn('Hi');
    const got = eventsOf(await reading);
    expect(got[0]!.type).toBe('user_turn');
    expect(got.at(-1)).toMatchObject({ type: 'agent_reply', text: 'ok: Hi' });
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
  });

  it('serves every reader of a session on a gateway from one consumer; a reader reaching back further still gets it all', async () => {
    const s = await startSession();
    const nc = await connect({ servers: stack.natsUrl });
    const jsm = await jetstreamManager(nc);
    const subject = `events.${s.agentId}.${s.sessionId}`;
    const consumersOf = async () => {
      let n = 0;
      for await (const c of jsm.consumers.list(EVENTS_STREAM)) {
        const filters = c.config.filter_subjects ?? [c.config.filter_subject];
        if (filters.includes(subject)) n++;
      }
      return n;
    };
    try {
      const endOf = (f: { event: string }) => f.event === 'session_ended';
      const a = readSse(await fetch(s.eventsUrl()), { stopWhen: endOf });
      const b = readSse(await fetch(s.eventsUrl()), { stopWhen: endOf });
      await s.turn('Hi');
      expect(await consumersOf()).toBe(1);
      // more events than the gateway keeps for late readers (4 KB in this suite): one from the first event
      // needs a consumer of its own, and gets everything
      await s.turn('Ada Lovelace is my name');
      await s.turn('1815');
      const c = readSse(await fetch(s.eventsUrl(), { headers: { 'last-event-id': '1' } }), {
        stopWhen: endOf,
      });
      await s.turn('I want to book, yes please');
      expect(await consumersOf()).toBe(2);
      await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
      const [ea, eb, ec] = (await Promise.all([a, b, c])).map(eventsOf);
      expect(ids(ea!)).toEqual(consecutive(1, ea!.length));
      expect(ea!.at(-1)!.type).toBe('session_ended');
      expect(eb).toEqual(ea);
      expect(ec).toEqual(ea!.slice(1));
      // the readers gone, so are their consumers
      await expect.poll(consumersOf).toBe(0);
    } finally {
      await nc.close();
    }
  });

  it('refuses more open streams per client than the limit with 429 and Retry-After', async () => {
    const s = await startSession();
    const open = await Promise.all([1, 2, 3].map(() => fetch(s.eventsUrl())));
    expect(open.map((r) => r.status)).toEqual([200, 200, 200]);
    const over = await fetch(s.eventsUrl());
    expect(over.status).toBe(429);
    expect(over.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await over.json()).toMatchObject({ code: 'RATE_LIMITED' });
    await Promise.all(open.map((r) => r.body!.cancel()));
    // the gateway frees a slot when it sees the client leave
    const again = await vi.waitFor(async () => {
      const res = await fetch(s.eventsUrl());
      if (res.status !== 200) throw new Error(`still ${res.status}`);
      return res;
    });
    await again.body!.cancel();
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
  });

  it('frees the slot of every client that leaves while its stream is set up: destroyed or half-closed', async () => {
    const s = await startSession();
    const url = new URL(s.eventsUrl());
    // more than the limit (3) of each: a request, then the socket destroyed at once, or its sending side
    // closed (a half-close) and then destroyed once the gateway answered or closed
    const leaving = (how: 'destroy' | 'half-close') =>
      new Promise<void>((resolve) => {
        const socket = netConnect(Number(url.port), url.hostname);
        socket.on('error', () => undefined);
        socket.on('close', () => resolve());
        socket.on('data', () => socket.destroy());
        socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`, () => {
          if (how === 'destroy') socket.destroy();
          else socket.end();
        });
      });
    for (const how of ['destroy', 'half-close'] as const) {
      await Promise.all(Array.from({ length: 10 }, () => leaving(how)));
      // the slots are free again well before the session ends (it is still open)
      const res = await vi.waitFor(
        async () => {
          const r = await fetch(s.eventsUrl());
          if (r.status !== 200) {
            await r.body?.cancel();
            throw new Error(`${how}: still ${r.status}`);
          }
          return r;
        },
        { timeout: 5000, interval: 100 },
      );
      await res.body!.cancel();
    }
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
  });

  it('ends the stream with an error event when the instance running the session is gone', async () => {
    const extra = await stack.addPlayground();
    // the session must land on the instance about to die: the other one leaves the start subject for now
    await stack.services.playground.stop();
    const s = await startSession();
    await stack.services.playground.start();
    const comments: string[] = [];
    const reading = readSse(await fetch(s.eventsUrl()), { comments });
    await s.turn('Hi');
    await extra.crash();
    const frames = await reading;
    expect(frames.at(-1)).toMatchObject({ event: 'error' });
    expect(frames.at(-1)!.id).toBeUndefined();
    expect(JSON.parse(frames.at(-1)!.data)).toMatchObject({ code: 'SESSION_LOST' });
    expect(comments).toContain('ping');
  });

  it('cuts a reader off that does not keep up, and the session does not wait for it', async () => {
    const s = await startSession();
    bigReply = `ok: ${'x'.repeat(200_000)}`;
    // a client that sends the request and never reads its answer
    const url = new URL(s.eventsUrl());
    const socket = netConnect(Number(url.port), url.hostname);
    socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    socket.pause();
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    const started = Date.now();
    for (let i = 0; i < 40; i++) {
      const t = await s.turn('big');
      expect(t.status).toBe(200);
      if (stack.logs.some((l) => l.includes('slow event stream cut off'))) break;
    }
    expect(stack.logs.some((l) => l.includes('slow event stream cut off'))).toBe(true);
    socket.resume();
    await closed;
    expect(Date.now() - started).toBeLessThan(20_000);
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
  });
});

describe('a test-run case', () => {
  it('has its own events stream, from session_started (type test) to session_ended', async () => {
    const agent = await http.post('/api/agents', { name: 'Cases', flow: flowFor() });
    const agentId = agent.body.id as string;
    const made = await http.post(`/api/agents/${agentId}/test-cases`, {
      name: 'greets and asks',
      turns: ['Hi', 'Ada'],
      expect: { steps: ['start', 'burst'] },
    });
    expect(made.status).toBe(201);
    const started = await http.post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: KEY } });
    expect(started.status).toBe(202);
    const run = await finishedRun(http, agentId, started.body.id, 10_000);
    expect(run.status).toBe('passed');
    expect(run.latency.turnMs).toBeGreaterThan(0);
    const caseSession = run.cases[0].observed.sessionId as string;
    const res = await fetch(`${stack.baseUrl}/api/agents/${agentId}/test-sessions/${caseSession}/events`);
    const events = eventsOf(await readSse(res));
    expect(events[0]).toMatchObject({ type: 'session_started', sessionType: 'test', version: 1 });
    expect(events.filter((e) => e.type === 'user_turn').map((e) => e.text)).toEqual(['Hi', 'Ada']);
    expect(events.at(-1)!.type).toBe('session_ended');
  });
});

describe("a turn's events, streamed by the turn request itself", () => {
  it("streams the turn (deltas, reply, figures) and ends with the JSON form's result", async () => {
    const s = await startSession();
    const res = await fetch(`${stack.baseUrl}/api/agents/${s.agentId}/text-sessions/${s.sessionId}/turns`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ text: 'Hi there friend' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const frames = await readSse(res);
    const result = frames.at(-1)!;
    expect(result.event).toBe('result');
    const body = JSON.parse(result.data);
    expect(body).toMatchObject({ sessionId: s.sessionId, replies: ['ok: Hi there friend'], stepId: 'burst' });
    const events = eventsOf(frames);
    expect(events[0]).toMatchObject({ type: 'user_turn', text: 'Hi there friend', final: true });
    expect(events.filter((e) => e.type === 'agent_reply_delta').length).toBeGreaterThan(1);
    expect(events.at(-1)).toMatchObject({ type: 'turn_metrics' });
    expect(events.at(-1)!.id).toBe(body.lastEventId);
    expect(body.metrics.turnMs).toBeGreaterThan(0);
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
  });

  it('refuses what the JSON form refuses, with the same status and body, before any stream', async () => {
    const s = await startSession();
    const post = (sessionId: string, body: unknown) =>
      fetch(`${stack.baseUrl}/api/agents/${s.agentId}/text-sessions/${sessionId}/turns`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify(body),
      });
    const missing = await post('no-such-session', { text: 'hi' });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await missing.json()).toMatchObject({ code: 'NOT_FOUND' });
    const empty = await post(s.sessionId, { text: '' });
    expect(empty.status).toBe(400);
    expect(await empty.json()).toMatchObject({ code: 'VALIDATION_FAILED' });
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
  });
});

describe('figures on every turn, stats per version', () => {
  it("measures the model's time to first token: after the model's delay, before the rest of its answer", async () => {
    firstTokenDelayMs = 300;
    restDelayMs = 400;
    const s = await startSession();
    // the model's connection is made by the first call: the figure is then the model's own delay
    await s.turn('Hi');
    // Bounds that hold however loaded the machine (a scheduling delay only adds): the first token comes
    // 300 ms after the answer's start, and the rest 400 ms after the first token, so a figure taken at the
    // answer's start is under 300, and one taken at its end leaves under 400 of the turn after it.
    let t = await s.turn('slow');
    for (let i = 0; i < 3; i++) {
      if (i > 0) t = await s.turn('slow');
      expect(t.status).toBe(200);
      const { llmTtftMs, turnMs } = t.body.metrics as { llmTtftMs: number; turnMs: number };
      expect(llmTtftMs).toBeGreaterThanOrEqual(300 - 5);
      expect(turnMs - llmTtftMs).toBeGreaterThanOrEqual(400 - 5);
    }
    await http.delete(`/api/agents/${s.agentId}/text-sessions/${s.sessionId}`);
    // on the transcript: the agent message of that turn carries the same figures
    const messages = await http.get(`/api/agents/${s.agentId}/test-sessions/${s.sessionId}/messages`);
    const withFigures = messages.body.filter((m: { metrics?: unknown }) => m.metrics);
    expect(withFigures.at(-1).metrics).toEqual(t.body.metrics);
    firstTokenDelayMs = 0;
    restDelayMs = 0;
  });

  it("keeps a version's stats at write time: sessions, turns, percentiles as the transcripts say", async () => {
    const agent = await http.post('/api/agents', { name: 'Stats', flow: flowFor() });
    const agentId = agent.body.id as string;
    const version = agent.body.version as number;
    const turnMs: number[] = [];
    const sessionIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const started = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
      const sessionId = started.body.sessionId as string;
      sessionIds.push(sessionId);
      for (const text of ['Hi', 'Ada']) {
        await http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text });
      }
      await http.delete(`/api/agents/${agentId}/text-sessions/${sessionId}`);
    }
    for (const id of sessionIds) {
      const messages = await http.get(`/api/agents/${agentId}/test-sessions/${id}/messages`);
      const figures = (messages.body as { metrics?: { turnMs: number; llmTtftMs?: number } }[]).flatMap(
        (m) => (m.metrics ? [m.metrics] : []),
      );
      // the literal greeting carries figures too, but called no model: the stats leave it out
      expect(figures.filter((f) => f.llmTtftMs === undefined)).toHaveLength(1);
      for (const f of figures) if (f.llmTtftMs !== undefined) turnMs.push(f.turnMs);
      const session = await http.get(`/api/agents/${agentId}/test-sessions/${id}`);
      expect(session.body).toMatchObject({ version, status: 'closed' });
      expect(session.body.usage[0]).toMatchObject({ kind: 'llm', promptTokens: expect.any(Number) });
    }
    const stats = await http.get(`/api/agents/${agentId}/versions/${version}/stats`);
    expect(stats.status).toBe(200);
    expect(stats.body).toMatchObject({ agentId, version, sessions: 3, turns: turnMs.length, errors: 0 });
    // nearest rank over the exact values; the histogram answers within its bucket width (±2 %)
    const sorted = [...turnMs].sort((a, b) => a - b);
    const rank = (q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
    for (const [q, p] of [
      [0.5, 'p50'],
      [0.9, 'p90'],
      [0.99, 'p99'],
    ] as const) {
      const exact = rank(q);
      expect(Math.abs(stats.body.figures.turnMs[p] - exact)).toBeLessThanOrEqual(Math.max(0.1, exact * 0.02));
    }
    expect(stats.body.figures.turnMs.count).toBe(turnMs.length);
    expect(stats.body.usage[0]).toMatchObject({ kind: 'llm' });
    expect(stats.body.usage[0].promptTokens).toBeGreaterThan(0);

    const agentWide = await http.get(`/api/agents/${agentId}/stats?since=${Date.now() - 3_600_000}`);
    expect(agentWide.status).toBe(200);
    expect(agentWide.body).toMatchObject({ version: null, sessions: 3, turns: turnMs.length });
    expect((await http.get(`/api/agents/${agentId}/stats?since=yesterday`)).status).toBe(400);
    expect((await http.get(`/api/agents/ghost/versions/1/stats`)).status).toBe(404);
    expect((await http.get(`/api/agents/${agentId}/versions/99/stats`)).status).toBe(404);
  });
});
