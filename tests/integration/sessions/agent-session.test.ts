import { LiveKitRoomAgents, type RoomAgent, type RoomAgentOptions, type RoomAgents } from '@vab/playground';

import { TokenVerifier } from 'livekit-server-sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fullFlow, startLivekitFake, withNode } from '@vab/testkit';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/** Joins no room (no media server runs here); records what it was asked and lets a test end the agent. */
class StubRoomAgents implements RoomAgents {
  mode: 'join' | 'fail' | 'hang' = 'join';
  started: RoomAgentOptions[] = [];
  stopped = 0;
  async start(opts: RoomAgentOptions): Promise<RoomAgent> {
    this.started.push(opts);
    if (this.mode === 'fail') throw new Error('could not connect to the room');
    // the wait is the test: an agent that never connects (longer than the start's own bound)
    if (this.mode === 'hang') await new Promise((r) => setTimeout(r, 4000));
    let stopped = false;
    return {
      stop: async () => {
        if (!stopped) this.stopped++;
        stopped = true;
      },
    };
  }
}

const SECRET_KEY = 'sk-provider-key-never-logged-42';
let fake: Awaited<ReturnType<typeof startLivekitFake>>;
let roomAgents: StubRoomAgents;
let stack: Stack;
let http: ReturnType<typeof api>;

const flow = () => withNode(fullFlow(), 'hook', { url: 'http://127.0.0.1:9/x' });
const body = (extra: object = {}) => ({
  ...flow(),
  livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
  apiKeys: { openai: SECRET_KEY, elevenlabs: SECRET_KEY, deepgram: SECRET_KEY },
  ...extra,
});

beforeAll(async () => {
  fake = await startLivekitFake();
  roomAgents = new StubRoomAgents();
  stack = await startStack({ roomAgents, playground: { AGENT_JOIN_TIMEOUT_MS: 500, MAX_SESSIONS: 3 } });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack?.close();
  await fake?.close();
});
afterEach(async () => {
  roomAgents.mode = 'join';
  for (const name of [...fake.rooms.keys()]) await http.delete('/api/agent-session', { roomName: name });
});

describe('POST /api/agent-session', () => {
  it('creates a room with short timeouts for one user, starts the agent, and returns a room-scoped token', async () => {
    const agent = await http.post('/api/agents', { name: 'Voice', flow: flow() });
    const res = await http.post('/api/agent-session', body({ agentId: agent.body.id }));
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['roomName', 'serverUrl', 'token']);
    const { token, roomName, serverUrl } = res.body;
    expect(serverUrl).toBe(fake.url);
    expect(roomName).toMatch(/^vab-pg-[0-9a-f-]{36}$/);

    const room = fake.rooms.get(roomName)!;
    expect(room).toMatchObject({ emptyTimeout: 60, departureTimeout: 20, maxParticipants: 1 });
    expect(JSON.parse(room.metadata)).toMatchObject({
      owner: expect.stringMatching(/^pg-test-/),
      agentId: agent.body.id,
    });

    const claims = await new TokenVerifier(fake.apiKey, fake.apiSecret).verify(token);
    expect(claims.video).toMatchObject({
      roomJoin: true,
      room: roomName,
      canPublish: true,
      canSubscribe: true,
    });
    expect(claims.video?.roomCreate).toBeFalsy();
    expect(claims.sub).toMatch(/^user-/);
    expect(claims.exp! - claims.nbf!).toBeLessThanOrEqual(600);

    // the agent joined with its own agent token for that room
    const started = roomAgents.started.at(-1)!;
    const agentClaims = await new TokenVerifier(fake.apiKey, fake.apiSecret).verify(started.agentToken);
    expect(agentClaims.video).toMatchObject({ roomJoin: true, room: roomName, agent: true });
    expect(agentClaims.kind).toBe('agent');
    expect(started.flow.startStepId).toBe('start');

    // recorded as a voice test session with the room
    const sessions = await http.get(`/api/agents/${agent.body.id}/test-sessions`);
    expect(sessions.body[0]).toMatchObject({ sessionType: 'voice', roomName, status: 'open' });
    started.record({ role: 'user', content: 'hello', stepId: 'start', timestamp: Date.now() });

    const stoppedBefore = roomAgents.stopped;
    expect((await http.delete('/api/agent-session', { roomName })).body).toEqual({ ok: true });
    expect(roomAgents.stopped).toBe(stoppedBefore + 1);
    expect(fake.rooms.has(roomName)).toBe(false);
    const closed = await http.get(`/api/agents/${agent.body.id}/test-sessions/${sessions.body[0].id}`);
    expect(closed.body.status).toBe('closed');
    expect(closed.body.durationMs).toBeGreaterThanOrEqual(0);
    const messages = await http.get(
      `/api/agents/${agent.body.id}/test-sessions/${sessions.body[0].id}/messages`,
    );
    expect(messages.body).toEqual([expect.objectContaining({ content: 'hello', stepId: 'start' })]);

    // idempotent: again, and for a room nobody knows
    expect((await http.delete('/api/agent-session', { roomName })).body).toEqual({ ok: true });
    expect((await http.delete('/api/agent-session', { roomName: 'vab-pg-unknown' })).body).toEqual({
      ok: true,
    });
  });

  it('refuses an invalid flow with 422 and its issues, creating no room', async () => {
    const res = await http.post('/api/agent-session', body({ nodes: [], edges: [] }));
    expect(res.status).toBe(422);
    expect(res.body.details.map((i: { code: string }) => i.code)).toContain('NO_AGENT');
    expect(fake.rooms.size).toBe(0);
  });

  it('names the missing credentials, never their values', async () => {
    const noLivekit = await http.post('/api/agent-session', {
      ...flow(),
      apiKeys: { openai: SECRET_KEY, elevenlabs: SECRET_KEY, deepgram: SECRET_KEY },
    });
    expect(noLivekit.status).toBe(400);
    expect(noLivekit.body.code).toBe('MISSING_CREDENTIALS');
    expect(noLivekit.body.message).toContain('LIVEKIT_URL');
    const noDeepgram = await http.post(
      '/api/agent-session',
      body({ apiKeys: { openai: SECRET_KEY, elevenlabs: SECRET_KEY } }),
    );
    expect(noDeepgram.status).toBe(400);
    expect(noDeepgram.body.message).toContain('deepgram');
    expect(noDeepgram.body.message).not.toContain(SECRET_KEY);
    expect((await http.post('/api/agent-session', { edges: [] })).status).toBe(400);
    expect(fake.rooms.size).toBe(0);
  });

  it.each([
    ['the agent cannot connect', 'fail'],
    ['the agent does not join in time', 'hang'],
  ] as const)('when %s: 502, the room is deleted and nothing is left', async (_what, mode) => {
    roomAgents.mode = mode;
    const agent = await http.post('/api/agents', { name: 'Failing', flow: flow() });
    const res = await http.post('/api/agent-session', body({ agentId: agent.body.id }));
    expect(res.status).toBe(502);
    expect(res.body.code).toBe('UPSTREAM_FAILED');
    expect(fake.rooms.size).toBe(0);
    expect(stack.services.playground.playground!.sessions.count('voice')).toBe(0);
    const sessions = await http.get(`/api/agents/${agent.body.id}/test-sessions`);
    expect(sessions.body[0].status).toBe('closed');
  });

  it('when the media server is down or refuses the credentials: 502 and nothing is left', async () => {
    const down = await http.post(
      '/api/agent-session',
      body({ livekit: { url: 'ws://127.0.0.1:9', apiKey: 'k', apiSecret: 's' } }),
    );
    expect(down.status).toBe(502);
    expect(down.body.message).toContain('unreachable');
    const refused = await http.post(
      '/api/agent-session',
      body({ livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: 'wrong-secret-wrong-secret-wrong' } }),
    );
    expect(refused.status).toBe(502);
    expect(refused.body.message).toContain('refused the credentials');
    expect(fake.rooms.size).toBe(0);
    expect(stack.services.playground.playground!.sessions.count('voice')).toBe(0);
  });

  // a stack of its own starts in it: set-up, bounded as a hook is (vitest.config.ts hookTimeout)
  it("with LiveKit's own room agents, an agent that cannot reach a media server leaves no room behind", async () => {
    const realStack = await startStack({
      roomAgents: new LiveKitRoomAgents(),
      playground: { AGENT_JOIN_TIMEOUT_MS: 3000 },
    });
    try {
      const res = await api(realStack.baseUrl).post('/api/agent-session', body());
      expect(res.status).toBe(502);
      expect(fake.rooms.size).toBe(0);
    } finally {
      await realStack.close();
    }
  }, 120_000);

  // a stack of its own starts in it: set-up, bounded as a hook is (vitest.config.ts hookTimeout)
  it('stops the session when the agent ends, the user leaves for good, or the maximum length passes', async () => {
    const a = await http.post('/api/agent-session', body());
    roomAgents.started.at(-1)!.onEnded('end step');
    await roomDeleted(a.body.roomName);

    const b = await http.post('/api/agent-session', body());
    const short = await startStack({
      roomAgents,
      playground: { USER_LEFT_GRACE_MS: 50, MAX_SESSION_MS: 1000 },
    });
    try {
      const c = await api(short.baseUrl).post('/api/agent-session', body());
      roomAgents.started.at(-1)!.onUserLeft();
      await roomDeleted(c.body.roomName, 50); // USER_LEFT_GRACE_MS
      const d = await api(short.baseUrl).post('/api/agent-session', body());
      await roomDeleted(d.body.roomName, 1000); // MAX_SESSION_MS
    } finally {
      await short.close();
    }
    expect(fake.rooms.has(b.body.roomName)).toBe(true);
  }, 120_000);

  it('keeps no credential in logs, storage or responses', async () => {
    const agent = await http.post('/api/agents', { name: 'Secretive', flow: flow() });
    const res = await http.post('/api/agent-session', body({ agentId: agent.body.id }));
    expect(res.status).toBe(200);
    const redis = JSON.stringify(
      await Promise.all((await stack.redis.keys('*')).map(async (k) => [k, await stack.redis.dump(k)])),
    );
    const everything = stack.logs.join('\n') + redis + JSON.stringify(res.body);
    expect(everything).not.toContain(SECRET_KEY);
    expect(everything).not.toContain(fake.apiSecret);
  });
});

describe('several playground instances', () => {
  // a stack of its own starts in it: set-up, bounded as a hook is (vitest.config.ts hookTimeout)
  it("spread creates, take none when full, route DELETE to the owner, and reap a crashed instance's rooms", async () => {
    // the reaper lists rooms with the server's own credentials
    const multi = await startStack({
      roomAgents,
      playground: { MAX_SESSIONS: 2, AGENT_JOIN_TIMEOUT_MS: 500 },
      providerEnv: {
        LIVEKIT_URL: fake.url,
        LIVEKIT_API_KEY: fake.apiKey,
        LIVEKIT_API_SECRET: fake.apiSecret,
      },
    });
    const h = api(multi.baseUrl);
    try {
      const second = await multi.addPlayground();
      const agentId = (await h.post('/api/agents', { name: 'Multi', flow: flow() })).body.id as string;
      const created = [];
      for (let i = 0; i < 4; i++) {
        const res = await h.post('/api/agent-session', body({ agentId }));
        expect(res.status).toBe(200);
        created.push(res.body.roomName as string);
      }
      const owners = created.map((n) => JSON.parse(fake.rooms.get(n)!.metadata).owner as string);
      expect(new Set(owners).size).toBe(2); // 2 + 2: a full instance took none
      const full = await h.post('/api/agent-session', body());
      expect(full.status).toBe(503);
      expect(full.body.code).toBe('CAPACITY_EXHAUSTED');

      // DELETE reaches the owner whichever instance receives it; a freed slot takes sessions again
      expect((await h.delete('/api/agent-session', { roomName: created[0] })).body).toEqual({ ok: true });
      expect(fake.rooms.has(created[0]!)).toBe(false);
      const again = await h.post('/api/agent-session', body({ agentId }));
      expect(again.status).toBe(200);
      created[0] = again.body.roomName;

      // kill the second instance: its rooms stay until a live instance reaps them
      const ownerOf = (n: string) => JSON.parse(fake.rooms.get(n)!.metadata).owner as string;
      const orphaned = created.filter((n) => ownerOf(n) === 'pg-test-2'); // the instance added second
      expect(orphaned).toHaveLength(2);
      const survivors = created.filter((n) => !orphaned.includes(n));
      await second.crash();
      // DELETE of a room whose owner is gone still deletes it on the media server
      expect((await h.delete('/api/agent-session', { roomName: orphaned[0] })).body).toEqual({ ok: true });
      expect(fake.rooms.has(orphaned[0]!)).toBe(false);
      const { deleted } = await multi.services.playground.playground!.room.reap();
      expect(deleted).toEqual([orphaned[1]]);
      expect(fake.rooms.has(orphaned[1]!)).toBe(false);
      // the reaped room's test session is closed; the live instance's sessions are untouched
      const sessions = (await h.get(`/api/agents/${agentId}/test-sessions`)).body as {
        roomName: string;
        status: string;
      }[];
      expect(sessions.find((t) => t.roomName === orphaned[1])?.status).toBe('closed');
      for (const n of survivors) expect(sessions.find((t) => t.roomName === n)?.status).toBe('open');
      for (const n of survivors) expect(fake.rooms.has(n)).toBe(true);
    } finally {
      await multi.close();
    }
  }, 120_000);
});

/**
 * The session's room is deleted, `afterMs` after the moment that ends it: one RoomService call, bounded by
 * MEDIA_SERVER_TIMEOUT_MS (5 s by default).
 */
const roomDeleted = (roomName: string, afterMs = 0) =>
  expect.poll(() => fake.rooms.has(roomName), { timeout: afterMs + 5_000, interval: 20 }).toBe(false);
