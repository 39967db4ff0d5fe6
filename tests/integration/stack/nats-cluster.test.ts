import { fullFlow, startLocalNatsCluster, withNode, type LocalNatsCluster } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/*
 * Every process on its own node of a 3-node NATS cluster: the gateway on A, agents and one playground on
 * B, sessions and another playground on C. Each is given its node's URL only and learns the others from
 * the cluster (as it would from a NATS_URL list), so a request always crosses a route.
 */
const KEY = 'sk-test-0123456789';
let cluster: LocalNatsCluster;
let stack: Stack;
let http: ReturnType<typeof api>;
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;

beforeAll(async () => {
  cluster = await startLocalNatsCluster({ size: 3 });
  stub = await startOpenAiStub(() => ({ content: 'ok' }));
  const [a, b, c] = cluster.nodes.map((n) => n.url);
  stack = await startStack({
    natsUrl: b,
    natsUrls: { gateway: a, agents: b, sessions: c, playground: b },
    playground: { MAX_SESSIONS: 1 },
  });
  await stack.addPlayground(c);
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack?.close();
  await stub?.close();
  await cluster?.dispose();
});

const flow = () => withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });

const until = <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> =>
  vi.waitFor(
    async () => {
      const got = await probe();
      if (got === undefined) throw new Error(`timed out waiting for ${what}`);
      return got;
    },
    { timeout: timeoutMs, interval: 100 },
  );

describe('on a 3-node NATS cluster', () => {
  it('answers every service across routes: a create, a lookup between services, a list', async () => {
    const agent = await http.post('/api/agents', { name: 'Routed', flow: flow() });
    expect(agent.status).toBe(201);
    // sessions (C) asks agents (B) whether the agent exists
    const session = await http.post(`/api/agents/${agent.body.id}/test-sessions`, { sessionType: 'text' });
    expect(session.status).toBe(201);
    expect((await http.get('/api/agents')).body.map((x: { id: string }) => x.id)).toContain(agent.body.id);
  });

  it('spreads sessions over instances on other nodes, reaches each owner, and signals capacity', async () => {
    const agentId = (await http.post('/api/agents', { name: 'Owners', flow: flow() })).body.id as string;
    const start = () => http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
    // one session each fills both instances (MAX_SESSIONS 1): they leave the queue group on B and on C
    const first = await start();
    const second = await start();
    expect([first.status, second.status]).toEqual([201, 201]);
    const third = await until('both instances to leave the queue group', async () => {
      const res = await start();
      return res.status === 503 ? res : undefined;
    });
    expect(third.body.code).toBe('CAPACITY_EXHAUSTED');
    // turns and the end reach each owner through the cluster, from the gateway on A
    for (const s of [first, second]) {
      const turn = await http.post(`/api/agents/${agentId}/text-sessions/${s.body.sessionId}/turns`, {
        text: 'hi',
      });
      expect(turn.status).toBe(200);
    }
    const ended = await http.delete(`/api/agents/${agentId}/text-sessions/${first.body.sessionId}`);
    expect(ended.body).toEqual({ ok: true });
    // the freed instance rejoins, and a new session starts again
    const again = await until('a freed instance to take work', async () => {
      const res = await start();
      return res.status === 201 ? res : undefined;
    });
    for (const s of [second, again]) {
      await http.delete(`/api/agents/${agentId}/text-sessions/${s.body.sessionId}`);
    }
  });

  it('keeps serving when a node dies: its clients move to the others', async () => {
    const agent = await http.post('/api/agents', { name: 'Survivor', flow: flow() });
    const agentId = agent.body.id as string;
    const live = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
    expect(live.status).toBe(201);
    // B holds the agents service and one playground instance
    await cluster.nodes[1]!.server.stop({ crash: true });
    try {
      const read = await until('the agents service back on another node', async () => {
        const res = await http.get(`/api/agents/${agentId}`);
        return res.status === 200 ? res : undefined;
      });
      expect(read.body.name).toBe('Survivor');
      // the session lives in its instance's memory: whichever node it is on now, its owner subject follows
      const turn = await until('the session owner back on another node', async () => {
        const res = await http.post(`/api/agents/${agentId}/text-sessions/${live.body.sessionId}/turns`, {
          text: 'still there?',
        });
        return res.status === 200 ? res : undefined;
      });
      expect(turn.body.sessionId).toBe(live.body.sessionId);
      await http.delete(`/api/agents/${agentId}/text-sessions/${live.body.sessionId}`);
    } finally {
      await cluster.nodes[1]!.server.start();
      await cluster.routed();
    }
  });
});
