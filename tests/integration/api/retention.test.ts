import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, keysMatching, startStack, type Stack } from '../../helpers/stack.js';

let stack: Stack;
let http: ReturnType<typeof api>;

beforeAll(async () => {
  stack = await startStack({
    maxVersions: 3,
    sessionsLimits: { maxConversationEntries: 3 },
    testSessionDays: 7,
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack?.close();
});

const flowNamed = (label: string) => ({ nodes: [{ id: 'start', type: 'conversation', label }], edges: [] });

async function agentWithVersions(labels: string[]) {
  const created = await http.post('/api/agents', { name: 'Retained', flow: flowNamed(labels[0]!) });
  const id = created.body.id as string;
  for (const label of labels.slice(1)) await http.patch(`/api/agents/${id}`, { flow: flowNamed(label) });
  return id;
}

const versionsOf = async (id: string) =>
  (await http.get(`/api/agents/${id}/versions`)).body.map((v: { version: number }) => v.version);

describe('version retention (MAX_VERSIONS_PER_AGENT = 3)', () => {
  it('keeps the newest versions and every version a deploy pins; the content of removed ones goes', async () => {
    const id = await agentWithVersions(['v1', 'v2']);
    expect((await http.post(`/api/agents/${id}/deploys`, {})).body.version).toBe(2);
    // v3's content comes back as v7: removing v3 must keep that content
    for (const label of ['v3', 'v4', 'v5', 'v6', 'v3']) {
      await http.patch(`/api/agents/${id}`, { flow: flowNamed(label) });
    }
    await stack.services.agents.agents!.retention.idle();

    expect(await versionsOf(id)).toEqual([2, 5, 6, 7]);
    expect((await http.get(`/api/agents/${id}/versions/1`)).status).toBe(404);
    expect((await http.get(`/api/agents/${id}/versions/3`)).status).toBe(404);
    expect((await http.get(`/api/agents/${id}/versions/2`)).body.flow).toEqual(flowNamed('v2'));
    expect((await http.get(`/api/agents/${id}`)).body.flow).toEqual(flowNamed('v3'));
    // one content key per distinct flow still named by a snapshot: v2, v5, v6, v3 (v7)
    expect(await keysMatching(stack.redis, `ag:{${id}}:c:*`)).toHaveLength(4);
    // a pinned old version can still be restored
    const restored = await http.post(`/api/agents/${id}/versions/2/restore`, {});
    expect(restored.body).toMatchObject({ version: 8, flow: flowNamed('v2') });
  });

  it('removes nothing while the sessions service cannot say which versions deploys pin', async () => {
    const id = await agentWithVersions(['a', 'b', 'c']);
    await stack.services.sessions.stop();
    try {
      await http.patch(`/api/agents/${id}`, { flow: flowNamed('d') });
      await http.patch(`/api/agents/${id}`, { flow: flowNamed('e') });
      await stack.services.agents.agents!.retention.idle();
      expect(await versionsOf(id)).toEqual([1, 2, 3, 4, 5]);
      expect(stack.logs.some((l) => l.includes('version retention skipped: pinned versions unknown'))).toBe(
        true,
      );
    } finally {
      await stack.services.sessions.start();
    }
    // the next save catches up
    await http.patch(`/api/agents/${id}`, { flow: flowNamed('f') });
    await stack.services.agents.agents!.retention.idle();
    expect(await versionsOf(id)).toEqual([4, 5, 6]);
  });
});

describe('builder chat cap (MAX_CONVERSATION_ENTRIES = 3)', () => {
  it('keeps the newest entries: the oldest go, no append is refused', async () => {
    const id = (await http.post('/api/agents', { name: 'Chatty' })).body.id;
    for (const n of [1, 2, 3, 4, 5]) {
      const res = await http.post(`/api/agents/${id}/conversations`, { role: 'user', content: `m${n}` });
      expect(res.status).toBe(201);
    }
    const list = (await http.get(`/api/agents/${id}/conversations`)).body;
    expect(list.map((e: { content: string }) => e.content)).toEqual(['m3', 'm4', 'm5']);
  });
});

describe('test-session retention (7 days)', () => {
  it('deletes sessions that started before it, with their messages, in batches; newer ones stay', async () => {
    const id = (await http.post('/api/agents', { name: 'Tested' })).body.id;
    const old: string[] = [];
    for (let i = 0; i < 230; i++) {
      old.push((await http.post(`/api/agents/${id}/test-sessions`, { sessionType: 'text' })).body.id);
    }
    const recent = (await http.post(`/api/agents/${id}/test-sessions`, { sessionType: 'voice' })).body.id;
    const message = { role: 'user', content: 'hello', stepId: 'start', timestamp: Date.now() };
    await http.post(`/api/agents/${id}/test-sessions/${old[0]}/messages`, message);
    await http.post(`/api/agents/${id}/test-sessions/${recent}/messages`, message);
    // eight days ago, as far as the index that retention reads is concerned
    const eightDaysAgo = Date.now() - 8 * 24 * 3600 * 1000;
    await stack.redis.zadd(`ss:{${id}}:ts`, ...old.flatMap((s) => [eightDaysAgo, s]));

    expect(await stack.services.sessions.sessions!.retention.sweep()).toBe(230);

    const listed = (await http.get(`/api/agents/${id}/test-sessions`)).body;
    expect(listed.map((s: { id: string }) => s.id)).toEqual([recent]);
    expect((await http.get(`/api/agents/${id}/test-sessions/${old[0]}`)).status).toBe(404);
    expect(await stack.redis.exists(`ss:{${id}}:ts:${old[0]}:msg`, `ss:{${id}}:ts:${old[229]}`)).toBe(0);
    expect((await http.get(`/api/agents/${id}/test-sessions/${recent}/messages`)).body).toHaveLength(1);
    expect(await stack.services.sessions.sessions!.retention.sweep()).toBe(0);
  });
});
