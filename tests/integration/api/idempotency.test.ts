import { startLivekitFake, fullFlow } from '@vab/testkit';
import type { RoomAgents } from '@vab/playground';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startStack, type Stack } from '../../helpers/stack.js';

let stack: Stack;
let http: ReturnType<typeof api>;
let fake: Awaited<ReturnType<typeof startLivekitFake>>;
let runnerStarts = 0;
const roomAgents: RoomAgents = {
  async start() {
    runnerStarts++;
    return { stop: async () => undefined };
  },
};

beforeAll(async () => {
  fake = await startLivekitFake();
  stack = await startStack({ roomAgents });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
  await fake.close();
});

const key = () => `k-${Math.random().toString(36).slice(2)}`;

describe('Idempotency-Key', () => {
  it('a retried create returns the first result and creates nothing new', async () => {
    const k = key();
    const first = await http.post('/api/agents', { name: 'Once' }, { 'idempotency-key': k });
    const retry = await http.post('/api/agents', { name: 'Once' }, { 'idempotency-key': k });
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.body).toEqual(first.body);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('etag')).toBe(first.headers.get('etag'));
    const list = await http.get('/api/agents');
    expect(list.body.filter((a: { id: string }) => a.id === first.body.id)).toHaveLength(1);
    expect(list.body.filter((a: { name: string }) => a.name === 'Once')).toHaveLength(1);
  });

  it('the same key with another request answers 409 and creates nothing', async () => {
    const k = key();
    await http.post('/api/agents', { name: 'First' }, { 'idempotency-key': k });
    const other = await http.post('/api/agents', { name: 'Second' }, { 'idempotency-key': k });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('CONFLICT');
    expect((await http.get('/api/agents')).body.some((a: { name: string }) => a.name === 'Second')).toBe(
      false,
    );
  });

  it('concurrent requests with one key create exactly one thing', async () => {
    const k = key();
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        http.post('/api/agents', { name: 'Racing' }, { 'idempotency-key': k }),
      ),
    );
    expect(results.every((r) => r.status === 201 || r.status === 409)).toBe(true);
    const ids = new Set(results.filter((r) => r.status === 201).map((r) => r.body.id));
    expect(ids.size).toBe(1);
    expect(
      (await http.get('/api/agents')).body.filter((a: { name: string }) => a.name === 'Racing'),
    ).toHaveLength(1);
  });

  it('a failed request does not hold its key: the retry runs again', async () => {
    const k = key();
    const missing = await http.post('/api/agents/00000000-0000-0000-0000-000000000000/deploys', undefined, {
      'idempotency-key': k,
    });
    expect(missing.status).toBe(404);
    const again = await http.post('/api/agents/00000000-0000-0000-0000-000000000000/deploys', undefined, {
      'idempotency-key': k,
    });
    expect(again.status).toBe(404);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
  });

  it('covers test sessions and deploys: no second session, no skipped deploy number', async () => {
    const agent = (await http.post('/api/agents', { name: 'Deployable' })).body.id as string;
    const k1 = key();
    const s1 = await http.post(
      `/api/agents/${agent}/test-sessions`,
      { sessionType: 'text' },
      { 'idempotency-key': k1 },
    );
    const s2 = await http.post(
      `/api/agents/${agent}/test-sessions`,
      { sessionType: 'text' },
      { 'idempotency-key': k1 },
    );
    expect(s2.body.id).toBe(s1.body.id);
    expect((await http.get(`/api/agents/${agent}/test-sessions`)).body).toHaveLength(1);
    const k2 = key();
    const d1 = await http.post(`/api/agents/${agent}/deploys`, undefined, { 'idempotency-key': k2 });
    const d2 = await http.post(`/api/agents/${agent}/deploys`, undefined, { 'idempotency-key': k2 });
    expect(d2.body).toEqual(d1.body);
    const d3 = await http.post(`/api/agents/${agent}/deploys`, undefined, { 'idempotency-key': key() });
    expect(d3.body.deployNumber).toBe(2);
  });

  it('covers POST /api/agent-session: one room, one agent, the same credentials', async () => {
    const k = key();
    const body = {
      ...fullFlow(),
      livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
      apiKeys: { openai: 'k', elevenlabs: 'k', deepgram: 'k' },
    };
    const before = runnerStarts;
    const a = await http.post('/api/agent-session', body, { 'idempotency-key': k });
    const b = await http.post('/api/agent-session', body, { 'idempotency-key': k });
    expect(a.status).toBe(200);
    expect(b.body).toEqual(a.body);
    expect(runnerStarts).toBe(before + 1);
    expect(fake.rooms.size).toBe(1);
    await http.delete('/api/agent-session', { roomName: a.body.roomName });
  });

  it('rejects a malformed key with 400', async () => {
    const res = await http.post('/api/agents', { name: 'x' }, { 'idempotency-key': 'has spaces in it' });
    expect(res.status).toBe(400);
    expect(res.body.issues[0].path).toBe('headers.idempotency-key');
  });
});
