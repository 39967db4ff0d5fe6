import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startStack, type Stack } from '../../helpers/stack.js';

let stack: Stack;
let http: ReturnType<typeof api>;

beforeAll(async () => {
  stack = await startStack({
    sessionsLimits: {
      maxMessageChars: 1000,
      maxOperationsPerEntry: 3,
      maxAttachmentsPerEntry: 3,
      maxConversationEntryBytes: 4096,
      maxMessagesPerSession: 12_000,
    },
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
});

const UNKNOWN = '00000000-0000-0000-0000-000000000000';

async function newAgent(name = 'Agent') {
  const res = await http.post('/api/agents', { name });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

async function openSession(agentId: string, body: object = { sessionType: 'voice', roomName: 'room-1' }) {
  const res = await http.post(`/api/agents/${agentId}/test-sessions`, body);
  expect(res.status).toBe(201);
  return res.body;
}

describe('builder conversations', () => {
  it('appends entries and returns them oldest first with operations and node attachments', async () => {
    const id = await newAgent();
    expect((await http.get(`/api/agents/${id}/conversations`)).body).toEqual([]);
    const first = await http.post(`/api/agents/${id}/conversations`, {
      role: 'user',
      content: 'Add a greeting',
      nodeAttachments: ['start-1'],
    });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      role: 'user',
      content: 'Add a greeting',
      operations: [],
      nodeAttachments: ['start-1'],
    });
    const ops = [
      { type: 'add_node', node: { id: 'start-1', nodeType: 'start', command: 'Hi', isLiteral: true } },
      {
        type: 'add_edge',
        edge: { source: 'agent-1', sourceHandle: 'output', target: 'start-1', targetHandle: 'in' },
      },
      { type: 'update_node', nodeId: 'start-1', params: { command: 'Hello' } },
    ];
    const second = await http.post(`/api/agents/${id}/conversations`, {
      role: 'assistant',
      content: 'Done',
      operations: ops,
    });
    expect(second.status).toBe(201);
    const list = await http.get(`/api/agents/${id}/conversations`);
    expect(list.body).toHaveLength(2);
    expect(list.body.map((e: { content: string }) => e.content)).toEqual(['Add a greeting', 'Done']);
    expect(list.body[1].operations).toEqual(ops);
    expect(list.body[0].timestamp).toBeLessThanOrEqual(list.body[1].timestamp);
  });

  it("keeps a front end's own roles, operations and attachments exactly as sent", async () => {
    const id = await newAgent();
    const entry = {
      role: 'system',
      content: 'Applied 2 edits',
      operations: [
        { op: 'replace', path: '/nodes/0/command', value: 'Hi!', meta: { by: 'copilot', undoable: null } },
        { type: 'explode_node', nodeId: 'a' },
      ],
      nodeAttachments: [{ nodeId: 'start-1', label: 'Start' }, 'end-1', null],
    };
    const res = await http.post(`/api/agents/${id}/conversations`, entry);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject(entry);
    expect((await http.get(`/api/agents/${id}/conversations`)).body[0]).toStrictEqual(res.body);
  });

  it('rejects what is truly wrong and over-limit entries, storing nothing', async () => {
    const id = await newAgent();
    const bad = [
      { role: 'not a role!', content: 'x' },
      { role: '', content: 'x' },
      { role: 'user', content: 'x', operations: ['add_node'] }, // each operation is an object
      { role: 'user', content: 'x', operations: {} },
      { role: 'user' },
    ];
    for (const body of bad) {
      const res = await http.post(`/api/agents/${id}/conversations`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    const tooMany = await http.post(`/api/agents/${id}/conversations`, {
      role: 'assistant',
      content: 'x',
      operations: Array.from({ length: 4 }, (_, i) => ({ type: 'remove_node', nodeId: `n${i}` })),
    });
    expect(tooMany.status).toBe(413);
    expect(tooMany.body.code).toBe('LIMIT_EXCEEDED');
    const attached = await http.post(`/api/agents/${id}/conversations`, {
      role: 'user',
      content: 'x',
      nodeAttachments: ['a', 'b', 'c', 'd'],
    });
    expect(attached.status).toBe(413);
    const heavy = await http.post(`/api/agents/${id}/conversations`, {
      role: 'user',
      content: 'x',
      operations: [{ blob: 'y'.repeat(5000) }],
    });
    expect(heavy.status).toBe(413);
    expect(heavy.body.message).toContain('bytes');
    expect((await http.get(`/api/agents/${id}/conversations`)).body).toEqual([]);
  });

  it('answers 404 for an unknown agent, keeps an archived agent readable but closed to new entries', async () => {
    expect((await http.get(`/api/agents/${UNKNOWN}/conversations`)).status).toBe(404);
    expect(
      (await http.post(`/api/agents/${UNKNOWN}/conversations`, { role: 'user', content: 'x' })).status,
    ).toBe(404);
    const id = await newAgent();
    await http.post(`/api/agents/${id}/conversations`, { role: 'user', content: 'kept' });
    await http.delete(`/api/agents/${id}`);
    const list = await http.get(`/api/agents/${id}/conversations`);
    expect(list.status).toBe(200);
    expect(list.body[0].content).toBe('kept');
    const write = await http.post(`/api/agents/${id}/conversations`, { role: 'user', content: 'new' });
    expect(write.status).toBe(409);
    expect(write.body.code).toBe('AGENT_ARCHIVED');
  });
});

describe('test sessions', () => {
  it('opens sessions with a server start time and lists them by startedAt descending', async () => {
    const id = await newAgent();
    expect((await http.get(`/api/agents/${id}/test-sessions`)).body).toEqual([]);
    const before = Date.now();
    const a = await openSession(id, { sessionType: 'voice', roomName: 'pg-a' });
    // the wait is the test: timestamps in ms must differ
    await new Promise((r) => setTimeout(r, 3));
    const b = await openSession(id, { sessionType: 'text' });
    expect(a).toMatchObject({
      agentId: id,
      sessionType: 'voice',
      roomName: 'pg-a',
      endedAt: null,
      durationMs: null,
      status: 'open',
    });
    expect(a.startedAt).toBeGreaterThanOrEqual(before);
    expect(b.roomName).toBeNull();
    const list = await http.get(`/api/agents/${id}/test-sessions`);
    expect(list.body.map((s: { id: string }) => s.id)).toEqual([b.id, a.id]);
    for (const s of list.body) {
      expect(Object.keys(s)).toEqual(
        expect.arrayContaining(['id', 'startedAt', 'endedAt', 'durationMs', 'roomName', 'sessionType']),
      );
    }
    expect((await http.get(`/api/agents/${id}/test-sessions/${a.id}`)).body).toEqual(a);
  });

  it('rejects a bad session type and a client-chosen start time', async () => {
    const id = await newAgent();
    expect((await http.post(`/api/agents/${id}/test-sessions`, { sessionType: 'video' })).status).toBe(400);
    expect((await http.post(`/api/agents/${id}/test-sessions`, {})).status).toBe(400);
    expect((await http.get(`/api/agents/${id}/test-sessions`)).body).toEqual([]);
  });

  it('closes open → closed; same values again are idempotent, different ones conflict', async () => {
    const id = await newAgent();
    const s = await openSession(id);
    const endedAt = s.startedAt + 65_000;
    const closed = await http.patch(`/api/agents/${id}/test-sessions/${s.id}`, {
      endedAt,
      durationMs: 65_000,
    });
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ id: s.id, endedAt, durationMs: 65_000, status: 'closed' });
    const again = await http.patch(`/api/agents/${id}/test-sessions/${s.id}`, {
      endedAt,
      durationMs: 65_000,
    });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(closed.body);
    const different = await http.patch(`/api/agents/${id}/test-sessions/${s.id}`, {
      endedAt: endedAt + 1,
      durationMs: 65_001,
    });
    expect(different.status).toBe(409);
    expect((await http.get(`/api/agents/${id}/test-sessions/${s.id}`)).body).toEqual(closed.body);
  });

  it('rejects an end before the start, negative or fractional values, leaving the session open', async () => {
    const id = await newAgent();
    const s = await openSession(id);
    const cases = [
      { endedAt: s.startedAt - 1, durationMs: 0 },
      { endedAt: s.startedAt + 10, durationMs: -5 },
      { endedAt: s.startedAt + 10.5, durationMs: 10 },
      { endedAt: s.startedAt + 10, durationMs: 1.5 },
      { endedAt: s.startedAt + 10 },
    ];
    for (const body of cases) {
      const res = await http.patch(`/api/agents/${id}/test-sessions/${s.id}`, body);
      expect(res.status).toBe(400);
      expect(res.body.issues.length).toBeGreaterThan(0);
    }
    expect((await http.get(`/api/agents/${id}/test-sessions/${s.id}`)).body.status).toBe('open');
  });

  it('answers 404 for unknown agents and sessions, and for a session under another agent', async () => {
    const id = await newAgent();
    const other = await newAgent();
    const s = await openSession(id);
    expect((await http.get(`/api/agents/${UNKNOWN}/test-sessions`)).status).toBe(404);
    expect((await http.post(`/api/agents/${UNKNOWN}/test-sessions`, { sessionType: 'voice' })).status).toBe(
      404,
    );
    expect((await http.get(`/api/agents/${id}/test-sessions/${UNKNOWN}`)).status).toBe(404);
    expect((await http.get(`/api/agents/${other}/test-sessions/${s.id}`)).status).toBe(404);
    expect(
      (
        await http.patch(`/api/agents/${other}/test-sessions/${s.id}`, {
          endedAt: s.startedAt,
          durationMs: 0,
        })
      ).status,
    ).toBe(404);
    expect((await http.get(`/api/agents/${other}/test-sessions/${s.id}/messages`)).status).toBe(404);
    const msg = { role: 'user', content: 'x', stepId: 's', timestamp: 1 };
    expect((await http.post(`/api/agents/${other}/test-sessions/${s.id}/messages`, msg)).status).toBe(404);
  });
});

describe('session messages', () => {
  it('returns messages in timestamp order, ties in arrival order, and accepts late messages after close', async () => {
    const id = await newAgent();
    const s = await openSession(id);
    const t = s.startedAt;
    const sent = [
      { role: 'assistant', content: 'third', stepId: 'start', timestamp: t + 30 },
      { role: 'user', content: 'first', stepId: 'start', timestamp: t + 10 },
      { role: 'assistant', content: 'tie-a', stepId: 'burst-1', timestamp: t + 20 },
      { role: 'tool', content: 'tie-b', stepId: 'burst-1', timestamp: t + 20 },
      { role: 'system', content: 'tie-c', stepId: 'burst-1', timestamp: t + 20 },
    ];
    for (const m of sent) {
      const res = await http.post(`/api/agents/${id}/test-sessions/${s.id}/messages`, m);
      expect(res.status).toBe(201);
      expect(res.body.message).toEqual(m);
    }
    await http.patch(`/api/agents/${id}/test-sessions/${s.id}`, { endedAt: t + 40, durationMs: 40 });
    const late = { role: 'user', content: 'late', stepId: 'end', timestamp: t + 35 };
    expect((await http.post(`/api/agents/${id}/test-sessions/${s.id}/messages`, late)).status).toBe(201);
    const list = await http.get(`/api/agents/${id}/test-sessions/${s.id}/messages`);
    expect(list.body.map((m: { content: string }) => m.content)).toEqual([
      'first',
      'tie-a',
      'tie-b',
      'tie-c',
      'third',
      'late',
    ]);
    expect(list.body[0]).toEqual(sent[1]);
  });

  it('rejects bad messages with 400/413 and stores nothing', async () => {
    const id = await newAgent();
    const s = await openSession(id);
    const base = { role: 'user', content: 'hi', stepId: 'start', timestamp: s.startedAt };
    const bad: [object, number][] = [
      [{ ...base, role: 'robot with spaces' }, 400],
      [{ ...base, role: 7 }, 400],
      [{ ...base, timestamp: -1 }, 400],
      [{ ...base, timestamp: 1.5 }, 400],
      [{ ...base, stepId: undefined }, 400],
      [{ ...base, content: 'x'.repeat(1001) }, 413],
    ];
    for (const [body, status] of bad) {
      expect((await http.post(`/api/agents/${id}/test-sessions/${s.id}/messages`, body)).status).toBe(status);
    }
    expect((await http.get(`/api/agents/${id}/test-sessions/${s.id}/messages`)).body).toEqual([]);
    // any short identifier is a role: the usual ones and a front end's own
    for (const role of ['agent', 'assistant', 'system', 'tool', 'narrator']) {
      expect(
        (await http.post(`/api/agents/${id}/test-sessions/${s.id}/messages`, { ...base, role })).status,
      ).toBe(201);
    }
  });

  it('reads a 10,000-message transcript whole and in order', async () => {
    const id = await newAgent();
    const s = await openSession(id);
    const N = 10_000;
    // Loaded over the bus in parallel batches, as a live session's recorder would.
    for (let start = 0; start < N; start += 500) {
      await Promise.all(
        Array.from({ length: 500 }, (_, j) =>
          http.post(`/api/agents/${id}/test-sessions/${s.id}/messages`, {
            role: j % 2 ? 'assistant' : 'user',
            content: `message ${start + j}`,
            stepId: 'opentalk',
            timestamp: s.startedAt + start + j,
          }),
        ),
      );
    }
    const list = await http.get(`/api/agents/${id}/test-sessions/${s.id}/messages`);
    expect(list.status).toBe(200);
    expect(list.body).toHaveLength(N);
    expect(list.body[0].content).toBe('message 0');
    expect(list.body[N - 1].content).toBe(`message ${N - 1}`);
  }, 60_000);
});

describe('deploys', () => {
  it('numbers 20 concurrent deploys 1..20 without gaps, pins the version, newest first', async () => {
    const id = await newAgent('Sales Bot');
    await http.patch(`/api/agents/${id}`, { flow: { nodes: [{ id: 'a', nodeType: 'agent' }], edges: [] } });
    const created = await Promise.all(
      Array.from({ length: 20 }, () => http.post(`/api/agents/${id}/deploys`, { external: true })),
    );
    expect(created.every((r) => r.status === 201)).toBe(true);
    expect(created.map((r) => r.body.deployNumber).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    expect(new Set(created.map((r) => r.body.subdomain))).toEqual(new Set(['sales-bot']));
    expect(created.every((r) => r.body.version === 2 && r.body.status === 'pending')).toBe(true);
    const list = await http.get(`/api/agents/${id}/deploys`);
    expect(list.body.map((d: { deployNumber: number }) => d.deployNumber)).toEqual(
      Array.from({ length: 20 }, (_, i) => 20 - i),
    );
  });

  it('gives each agent a unique DNS-safe subdomain, stable across its deploys and renames', async () => {
    const a = await newAgent('Café  Concierge!!');
    const b = await newAgent('cafe concierge');
    const da = await http.post(`/api/agents/${a}/deploys`, { external: true });
    const db = await http.post(`/api/agents/${b}/deploys`, { external: true });
    expect(da.body.subdomain).toBe('cafe-concierge');
    expect(db.body.subdomain).toMatch(/^cafe-concierge-\d+$/);
    await http.patch(`/api/agents/${a}`, { name: 'Something else' });
    expect((await http.post(`/api/agents/${a}/deploys`, { external: true })).body.subdomain).toBe(
      'cafe-concierge',
    );
    for (const s of [da.body.subdomain, db.body.subdomain])
      expect(s).toMatch(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/);
  });

  it('moves pending → building → live, supersedes the previous live deploy, and refuses illegal moves', async () => {
    const id = await newAgent('Lifecycle');
    const one = (await http.post(`/api/agents/${id}/deploys`, { external: true })).body;
    const path = (d: { id: string }) => `/api/agents/${id}/deploys/${d.id}`;
    const illegal = await http.patch(path(one), { status: 'live' });
    expect(illegal.status).toBe(409);
    expect(illegal.body.code).toBe('ILLEGAL_TRANSITION');
    expect((await http.patch(path(one), { status: 'building' })).body.status).toBe('building');
    expect((await http.patch(path(one), { status: 'live' })).body.status).toBe('live');
    expect((await http.patch(path(one), { status: 'live' })).status).toBe(200);
    expect((await http.patch(path(one), { status: 'failed' })).status).toBe(409);
    expect((await http.patch(path(one), { status: 'superseded' })).status).toBe(400);

    const two = (await http.post(`/api/agents/${id}/deploys`, { external: true })).body;
    await http.patch(path(two), { status: 'building' });
    await http.patch(path(two), { status: 'live' });
    const list = (await http.get(`/api/agents/${id}/deploys`)).body;
    expect(list.map((d: { status: string }) => d.status)).toEqual(['live', 'superseded']);
    expect(list[1].updatedAt).toBeGreaterThanOrEqual(list[1].createdAt);

    const three = (await http.post(`/api/agents/${id}/deploys`, { external: true })).body;
    expect((await http.patch(path(three), { status: 'failed' })).body.status).toBe('failed');
    expect((await http.patch(path(three), { status: 'building' })).status).toBe(409);
    expect((await http.patch(`/api/agents/${id}/deploys/${UNKNOWN}`, { status: 'building' })).status).toBe(
      404,
    );
  });

  it('takes the live deploy offline when its agent is archived, says so, and lets none go live again', async () => {
    const id = await newAgent('Retired');
    const path = (d: { id: string }) => `/api/agents/${id}/deploys/${d.id}`;
    const live = (await http.post(`/api/agents/${id}/deploys`, { external: true })).body;
    await http.patch(path(live), { status: 'building' });
    expect((await http.patch(path(live), { status: 'live' })).body.status).toBe('live');
    const next = (await http.post(`/api/agents/${id}/deploys`, { external: true })).body;
    await http.patch(path(next), { status: 'building' });

    const archived = await http.delete(`/api/agents/${id}`);
    expect(archived.status).toBe(200);
    // the archive's answer names the deploy it took offline, and why
    expect(archived.body).toMatchObject({
      id,
      archived: true,
      stoppedDeploy: {
        id: live.id,
        deployNumber: 1,
        status: 'stopped',
        stopped: { reason: 'agent archived' },
      },
    });
    expect(archived.body.stoppedDeploy.stopped.at).toEqual(expect.any(Number));
    const list = (await http.get(`/api/agents/${id}/deploys`)).body as { id: string; status: string }[];
    expect(list.map((d) => [d.id, d.status])).toEqual([
      [next.id, 'building'],
      [live.id, 'stopped'],
    ]);
    expect(list[1]).toMatchObject({ stopped: { reason: 'agent archived' } });
    // nothing of it goes live again: neither the building deploy nor the stopped one
    for (const d of [next, live]) {
      const moved = await http.patch(path(d), { status: 'live' });
      expect(moved.status).toBe(409);
      expect(moved.body.code).toBe('AGENT_ARCHIVED');
    }
    expect(
      (await http.get(`/api/agents/${id}/deploys`)).body.map((d: { status: string }) => d.status),
    ).toEqual(['building', 'stopped']);
    // a build that fails is still recorded
    expect((await http.patch(path(next), { status: 'failed' })).body.status).toBe('failed');

    // an agent with nothing live: the archive says so
    const quiet = await newAgent('Quiet');
    expect((await http.delete(`/api/agents/${quiet}`)).body).toMatchObject({
      archived: true,
      stoppedDeploy: null,
    });
  });

  it('undoes an archive whose live deploy cannot be taken offline, and archives when asked again', async () => {
    const id = await newAgent('Stubborn');
    const d = (await http.post(`/api/agents/${id}/deploys`, { external: true })).body;
    await http.patch(`/api/agents/${id}/deploys/${d.id}`, { status: 'building' });
    await http.patch(`/api/agents/${id}/deploys/${d.id}`, { status: 'live' });
    await stack.services.sessions.stop();
    try {
      const refused = await http.delete(`/api/agents/${id}`);
      expect(refused.status).toBe(503);
      // nothing changed: the agent is active and listed
      expect((await http.get(`/api/agents/${id}`)).status).toBe(200);
      expect((await http.get('/api/agents')).body.map((a: { id: string }) => a.id)).toContain(id);
      expect(stack.logs.some((l) => l.includes('"code":"ARCHIVE_UNDONE"'))).toBe(true);
    } finally {
      await stack.services.sessions.start();
    }
    expect((await http.get(`/api/agents/${id}/deploys`)).body[0].status).toBe('live');
    const archived = await http.delete(`/api/agents/${id}`);
    expect(archived.status).toBe(200);
    expect(archived.body.stoppedDeploy).toMatchObject({ id: d.id, status: 'stopped' });
    expect((await http.get(`/api/agents/${id}`)).status).toBe(404);
  });

  it('answers 404 for an unknown agent and 409 for a deploy of an archived one', async () => {
    expect((await http.get(`/api/agents/${UNKNOWN}/deploys`)).status).toBe(404);
    expect((await http.post(`/api/agents/${UNKNOWN}/deploys`)).status).toBe(404);
    const id = await newAgent();
    expect((await http.get(`/api/agents/${id}/deploys`)).body).toEqual([]);
    await http.delete(`/api/agents/${id}`);
    expect((await http.post(`/api/agents/${id}/deploys`, { external: true })).status).toBe(409);
    expect((await http.get(`/api/agents/${id}/deploys`)).body).toEqual([]);
  });
});
