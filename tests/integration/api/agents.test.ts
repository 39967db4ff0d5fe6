import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, keysMatching, sampleFlow, startStack, type Stack } from '../../helpers/stack.js';

let stack: Stack;
let http: ReturnType<typeof api>;

beforeAll(async () => {
  stack = await startStack();
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
});

async function createAgent(name = 'Receptionist', flow: unknown = sampleFlow()) {
  const res = await http.post('/api/agents', { name, flow });
  expect(res.status).toBe(201);
  return res;
}

describe('POST /api/agents', () => {
  it('creates the agent with its first snapshot, flow stored verbatim', async () => {
    const flow = sampleFlow();
    const res = await createAgent('Front desk', flow);
    expect(res.body).toMatchObject({ name: 'Front desk', version: 1, flow });
    expect(typeof res.body.id).toBe('string');
    expect(res.body.createdAt).toBe(res.body.updatedAt);
    expect(res.headers.get('etag')).toBe('"1.1"');

    const read = await http.get(`/api/agents/${res.body.id}`);
    expect(read.status).toBe(200);
    // unknown node params (customUiThing) survive the round trip
    expect(read.body.flow).toEqual(flow);
    const versions = await http.get(`/api/agents/${res.body.id}/versions`);
    expect(versions.body).toHaveLength(1);
    expect(versions.body[0]).toMatchObject({ version: 1 });
  });

  it('defaults the flow to an empty graph', async () => {
    const res = await http.post('/api/agents', { name: 'Blank' });
    expect(res.status).toBe(201);
    expect(res.body.flow).toEqual({ nodes: [], edges: [] });
  });

  it.each([
    [{}, 'body.name'],
    [{ name: '   ' }, 'body.name'],
    [{ name: 'x'.repeat(201) }, 'body.name'],
    [{ name: 'ok', flow: { nodes: 'nope', edges: [] } }, 'body.flow.nodes'],
    [{ name: 'ok', flow: { nodes: [{ nodeType: 'agent' }], edges: [] } }, 'body.flow.nodes.0.id'],
    [{ name: 'ok', flow: { nodes: [], edges: [{ source: 'a' }] } }, 'body.flow.edges.0.target'],
    [{ name: 42 }, 'body.name'],
  ])('rejects %j with a field-level 400 and stores nothing', async (body, path) => {
    const before = await http.get('/api/agents');
    const res = await http.post('/api/agents', body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(res.body.issues.map((i: { path: string }) => i.path)).toContain(path);
    expect(res.body.requestId).toBe(res.headers.get('x-request-id'));
    const after = await http.get('/api/agents');
    expect(after.body).toEqual(before.body);
  });

  it('answers invalid JSON, wrong content type and prototype pollution with a JSON 4xx', async () => {
    const bad = await http.raw('POST', '/api/agents', '{"name": ', { 'content-type': 'application/json' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('INVALID_JSON');
    const text = await http.raw('POST', '/api/agents', 'name=x', { 'content-type': 'text/plain' });
    expect(text.status).toBe(415);
    expect(text.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const proto = await http.raw('POST', '/api/agents', '{"name":"x","__proto__":{"admin":true}}', {
      'content-type': 'application/json',
    });
    expect(proto.status).toBe(400);
    expect(proto.body.code).toBe('INVALID_JSON');
  });

  it('answers 413 for a body above the limit', async () => {
    const huge = {
      name: 'big',
      flow: { nodes: [{ id: 'n', nodeType: 'agent', blob: 'x'.repeat(3 * 1024 * 1024) }], edges: [] },
    };
    const res = await http.post('/api/agents', huge);
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('PAYLOAD_TOO_LARGE');
  });
});

describe('GET /api/agents', () => {
  it('lists only id, name, createdAt, updatedAt, by updatedAt descending, without archived agents', async () => {
    const a = await createAgent('A');
    const b = await createAgent('B');
    const c = await createAgent('C');
    // the wait is the test: timestamps in ms must differ
    await new Promise((r) => setTimeout(r, 5));
    // touching A makes it the most recently updated
    await http.patch(`/api/agents/${a.body.id}`, { name: 'A2' });
    await http.delete(`/api/agents/${b.body.id}`);

    const list = await http.get('/api/agents');
    expect(list.status).toBe(200);
    const ids = list.body.map((x: { id: string }) => x.id);
    expect(ids).not.toContain(b.body.id);
    expect(ids.indexOf(a.body.id)).toBeLessThan(ids.indexOf(c.body.id));
    const updated = list.body.map((x: { updatedAt: number }) => x.updatedAt);
    expect([...updated].sort((x, y) => y - x)).toEqual(updated);
    const entry = list.body.find((x: { id: string }) => x.id === a.body.id);
    expect(Object.keys(entry).sort()).toEqual(['createdAt', 'id', 'name', 'updatedAt']);
    expect(entry.name).toBe('A2');
  });

  it('lists names exactly as saved, whatever characters they hold, and follows restores', async () => {
    const name = 'Quote " back\\slash / tab\t ünï 🎧 </script>';
    const a = await createAgent(name);
    const listed = (await http.get('/api/agents')).body.find((x: { id: string }) => x.id === a.body.id);
    expect(listed).toEqual({
      id: a.body.id,
      name,
      createdAt: a.body.createdAt,
      updatedAt: a.body.updatedAt,
    });
    // the wait is the test: timestamps in ms must differ
    await new Promise((r) => setTimeout(r, 5));
    await http.patch(`/api/agents/${a.body.id}`, { flow: { nodes: [], edges: [] } });
    // the wait is the test: timestamps in ms must differ
    await new Promise((r) => setTimeout(r, 5));
    const restored = await http.post(`/api/agents/${a.body.id}/versions/1/restore`, {});
    expect(restored.status).toBe(200);
    const after = (await http.get('/api/agents')).body;
    expect(after[0]).toEqual({
      id: a.body.id,
      name,
      createdAt: a.body.createdAt,
      updatedAt: restored.body.updatedAt,
    });
  });

  it('moves a list stored before the view had its own slot, at start, and nothing is lost', async () => {
    const a = await createAgent('Legacy A');
    const b = await createAgent('Legacy B');
    const before = (await http.get('/api/agents')).body;
    // the store as an earlier release left it: the view under ag:index / ag:summaries only
    const rows = await stack.redis.hgetall('ag:{views}:summaries');
    const scores = await stack.redis.zrange('ag:{views}:index', 0, -1, 'WITHSCORES');
    await stack.redis.del('ag:{views}:index', 'ag:{views}:summaries', 'ag:{views}:revs');
    await stack.redis.hset('ag:summaries', rows);
    await stack.redis.zadd(
      'ag:index',
      ...scores.map((v, i) => (i % 2 === 0 ? scores[i + 1]! : scores[i - 1]!)),
    );
    await stack.services.agents.stop();
    await stack.services.agents.start();
    const after = (await http.get('/api/agents')).body;
    expect(after).toEqual(before);
    expect(after.slice(0, 2).map((x: { id: string }) => x.id)).toEqual([b.body.id, a.body.id]);
    expect(await stack.redis.exists('ag:index')).toBe(0);
    expect(await stack.redis.exists('ag:summaries')).toBe(0);
    expect(stack.logs.some((l) => l.includes('list view moved to its own slot'))).toBe(true);
  });

  it('a view left one step behind by an interrupted write is rebuilt by the repair', async () => {
    const a = await createAgent('Interrupted');
    const renamed = await http.patch(`/api/agents/${a.body.id}`, { name: 'Interrupted, renamed' });
    const gone = await createAgent('Archived, view behind');
    await http.delete(`/api/agents/${gone.body.id}`);
    // as if each request had stopped between its agent's script and the view: the view shows older states
    await stack.redis.zrem('ag:{views}:index', a.body.id);
    await stack.redis.hdel('ag:{views}:summaries', a.body.id);
    await stack.redis.hdel('ag:{views}:revs', a.body.id);
    await stack.redis.zadd('ag:{views}:index', gone.body.updatedAt, gone.body.id);
    const { id, name, createdAt, updatedAt } = gone.body;
    await stack.redis.hset('ag:{views}:summaries', id, JSON.stringify({ id, name, createdAt, updatedAt }));
    const behind = (await http.get('/api/agents')).body.map((x: { id: string }) => x.id);
    expect(behind).not.toContain(a.body.id);
    expect(behind).toContain(gone.body.id);

    const repaired = await stack.services.agents.agents!.repairViews();
    expect(repaired.agents).toBeGreaterThanOrEqual(2);
    const list = (await http.get('/api/agents')).body;
    expect(list.map((x: { id: string }) => x.id)).not.toContain(gone.body.id);
    expect(list.find((x: { id: string }) => x.id === a.body.id)).toEqual({
      id: a.body.id,
      name: 'Interrupted, renamed',
      createdAt: a.body.createdAt,
      updatedAt: renamed.body.updatedAt,
    });
  });
});

describe('PATCH /api/agents/:id', () => {
  it('renames without a new snapshot, saves a flow as a new version, and bumps updatedAt', async () => {
    const created = await createAgent('Old name');
    const id = created.body.id;
    // the wait is the test: timestamps in ms must differ
    await new Promise((r) => setTimeout(r, 3));
    const renamed = await http.patch(`/api/agents/${id}`, { name: 'New name' });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'New name', version: 1 });
    expect(renamed.body.updatedAt).toBeGreaterThan(created.body.updatedAt);

    const flow2 = { ...sampleFlow(), nodes: sampleFlow().nodes.slice(0, 2) };
    const saved = await http.patch(`/api/agents/${id}`, { flow: flow2 });
    expect(saved.body).toMatchObject({ name: 'New name', version: 2, flow: flow2 });
    const read = await http.get(`/api/agents/${id}`);
    expect(read.body.flow).toEqual(flow2);
    expect(read.headers.get('etag')).toBe(saved.headers.get('etag'));
  });

  it('takes an empty patch as a no-op: the agent as it is, no new version, no updatedAt bump', async () => {
    const created = await createAgent();
    const id = created.body.id as string;
    const etag = created.headers.get('etag')!;
    const res = await http.patch(`/api/agents/${id}`, {}, { 'if-match': etag });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(created.body);
    expect(res.headers.get('etag')).toBe(etag);
    expect((await http.get(`/api/agents/${id}/versions`)).body).toHaveLength(1);
    // the precondition still holds the request to the state it names
    const stale = await http.patch(`/api/agents/${id}`, {}, { 'if-match': '"9.9"' });
    expect(stale.status).toBe(412);
    expect((await http.get(`/api/agents/${id}`)).body).toEqual(created.body);
  });

  it('stores a flow exactly as the canvas sent it, and answers 400 only for what storage needs', async () => {
    // a React Flow canvas: canvas fields, null handles, edge ids and styles, a node without a type yet
    const canvas = {
      nodes: [
        {
          id: 'agent-1',
          nodeType: 'agent',
          position: { x: 10.5, y: -3 },
          measured: { width: 220, height: 96 },
          data: { label: 'Agent', collapsed: null },
          selected: false,
          dragging: null,
        },
        { id: 'note-1', type: 'sticky', data: { text: 'ask about parking' }, parentId: null },
      ],
      edges: [
        {
          id: 'xy-edge__agent-1-note-1',
          source: 'agent-1',
          sourceHandle: null,
          target: 'note-1',
          targetHandle: null,
          type: 'smoothstep',
          style: { stroke: '#888', strokeWidth: 2 },
          animated: true,
        },
        { source: 'agent-1', target: 'note-1' },
      ],
      viewport: { x: 0, y: 0, zoom: 1.25 },
    };
    const created = await http.post('/api/agents', { name: 'Canvas', flow: canvas });
    expect(created.status).toBe(201);
    expect(created.body.flow).toStrictEqual(canvas);
    expect((await http.get(`/api/agents/${created.body.id}`)).body.flow).toStrictEqual(canvas);
    const saved = await http.patch(`/api/agents/${created.body.id}`, { flow: canvas });
    expect((await http.get(`/api/agents/${created.body.id}/versions/2`)).body.flow).toStrictEqual(canvas);
    expect(saved.body.flow).toStrictEqual(canvas);
    for (const bad of [
      { nodes: [{ nodeType: 'agent' }], edges: [] }, // a node without an id
      { nodes: [{ id: 7 }], edges: [] },
      { nodes: [], edges: [{ source: 'a' }] }, // an edge without a target
      { nodes: [], edges: [{ source: 'a', target: 'b', sourceHandle: 3 }] },
      { nodes: 'a', edges: [] },
    ]) {
      const res = await http.post('/api/agents', { name: 'Bad', flow: bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
  });

  it('gives 30 concurrent saves 30 distinct, gapless versions and loses none', async () => {
    const created = await createAgent('Busy');
    const id = created.body.id;
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        http.patch(`/api/agents/${id}`, { flow: { nodes: [{ id: `n${i}`, nodeType: 'start' }], edges: [] } }),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    const versions = results.map((r) => r.body.version).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: 30 }, (_, i) => i + 2));
    const history = await http.get(`/api/agents/${id}/versions`);
    expect(history.body.map((v: { version: number }) => v.version)).toEqual(
      Array.from({ length: 31 }, (_, i) => i + 1),
    );
    // every save is retrievable with the flow that was sent
    for (const r of results) {
      const v = await http.get(`/api/agents/${id}/versions/${r.body.version}`);
      expect(v.body.flow).toEqual(r.body.flow);
    }
    const latest = await http.get(`/api/agents/${id}`);
    expect(latest.body.version).toBe(31);
  });

  it('answers 412 for a stale If-Match and changes nothing; a current one succeeds', async () => {
    const created = await createAgent('Concurrent');
    const id = created.body.id;
    const etag = created.headers.get('etag')!;
    const first = await http.patch(`/api/agents/${id}`, { name: 'Tab 1' }, { 'if-match': etag });
    expect(first.status).toBe(200);
    const stale = await http.patch(
      `/api/agents/${id}`,
      { name: 'Tab 2', flow: sampleFlow() },
      { 'if-match': etag },
    );
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('PRECONDITION_FAILED');
    const read = await http.get(`/api/agents/${id}`);
    expect(read.body).toMatchObject({ name: 'Tab 1', version: 1 });
    const ok = await http.patch(
      `/api/agents/${id}`,
      { name: 'Tab 2' },
      { 'if-match': read.headers.get('etag')! },
    );
    expect(ok.status).toBe(200);
    const star = await http.patch(`/api/agents/${id}`, { name: 'Any' }, { 'if-match': '*' });
    expect(star.status).toBe(200);
  });

  it('stores identical content once: unchanged saves add only version entries', async () => {
    const created = await createAgent('Autosave');
    const id = created.body.id;
    for (let i = 0; i < 5; i++) await http.patch(`/api/agents/${id}`, { flow: sampleFlow() });
    const versions = await http.get(`/api/agents/${id}/versions`);
    expect(versions.body).toHaveLength(6);
    expect(new Set(versions.body.map((v: { contentHash: string }) => v.contentHash)).size).toBe(1);
    const contentKeys = await keysMatching(stack.redis, `ag:{${id}}:c:*`);
    expect(contentKeys).toHaveLength(1);
  });
});

describe('versions', () => {
  it('lists metadata only, returns one snapshot, and restores it as a new latest version', async () => {
    const created = await createAgent('History');
    const id = created.body.id;
    const v2flow = { nodes: [{ id: 'x', nodeType: 'start', command: 'v2' }], edges: [] };
    await http.patch(`/api/agents/${id}`, { flow: v2flow });
    const list = await http.get(`/api/agents/${id}/versions`);
    expect(list.body).toHaveLength(2);
    expect(Object.keys(list.body[0]).sort()).toEqual(['contentHash', 'createdAt', 'sizeBytes', 'version']);
    expect(list.body[0].sizeBytes).toBe(Buffer.byteLength(JSON.stringify(created.body.flow)));

    const v1 = await http.get(`/api/agents/${id}/versions/1`);
    expect(v1.body.flow).toEqual(created.body.flow);
    const restored = await http.post(`/api/agents/${id}/versions/1/restore`);
    expect(restored.status).toBe(200);
    expect(restored.body).toMatchObject({ version: 3, flow: created.body.flow });
    const after = await http.get(`/api/agents/${id}/versions`);
    expect(after.body[2].contentHash).toBe(after.body[0].contentHash);

    expect((await http.get(`/api/agents/${id}/versions/99`)).status).toBe(404);
    expect((await http.post(`/api/agents/${id}/versions/99/restore`)).status).toBe(404);
    expect((await http.get(`/api/agents/${id}/versions/zero`)).status).toBe(400);
  });
});

describe('DELETE /api/agents/:id', () => {
  it('archives: hidden from the list, kept in storage, GET/PATCH/DELETE answer 404', async () => {
    const created = await createAgent('Doomed');
    const id = created.body.id;
    const del = await http.delete(`/api/agents/${id}`);
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ id, archived: true });
    expect((await http.get(`/api/agents/${id}`)).status).toBe(404);
    expect((await http.patch(`/api/agents/${id}`, { name: 'x' })).status).toBe(404);
    expect((await http.delete(`/api/agents/${id}`)).status).toBe(404);
    expect((await http.get(`/api/agents/${id}/versions`)).status).toBe(404);
    const list = await http.get('/api/agents');
    expect(list.body.map((a: { id: string }) => a.id)).not.toContain(id);
    // retained in storage
    expect(await stack.redis.hget(`ag:{${id}}`, 'name')).toBe('Doomed');
  });

  it('answers 404 for unknown ids and 400 for malformed ones', async () => {
    const unknown = await http.get('/api/agents/00000000-0000-0000-0000-000000000000');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'NOT_FOUND' });
    expect((await http.get('/api/agents/bad%20id')).status).toBe(400);
    // found by the fuzz test: the router's own errors answer in the API's shape, with the request id
    const long = await http.get(`/api/agents/${'a'.repeat(500)}`);
    expect(long.status).toBe(400);
    expect(long.body).toMatchObject({
      code: 'VALIDATION_FAILED',
      requestId: long.headers.get('x-request-id'),
    });
    const badUrl = await http.get('/api/agents/%E0%A4%A');
    expect(badUrl.status).toBe(400);
    expect(badUrl.body.code).toBe('VALIDATION_FAILED');
    expect((await http.get('/api/nothing-here')).status).toBe(404);
  });
});

describe('gateway basics', () => {
  it('serves health, readiness, the OpenAPI document and docs', async () => {
    expect((await http.get('/healthz')).body).toEqual({ status: 'ok' });
    const ready = await http.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.services).toEqual({ agents: 'up', sessions: 'up', playground: 'up' });
    const doc = await http.get('/openapi.json');
    expect(doc.body.openapi).toBe('3.1.0');
    expect(Object.keys(doc.body.paths)).toContain('/api/agents/{id}');
    expect(
      doc.body.paths['/api/agents'].post.requestBody.content['application/json'].schema.required,
    ).toContain('name');
    const docs = await fetch(`${stack.baseUrl}/docs/`);
    expect(docs.status).toBe(200);
    expect(await docs.text()).toContain('swagger');
  });

  it('carries the request id to the service logs', async () => {
    const requestId = 'trace-me-123';
    const created = await http.post('/api/agents', { name: 'Traced' }, { 'x-request-id': requestId });
    expect(created.headers.get('x-request-id')).toBe(requestId);
    const lines = stack.logs.filter((l) => l.includes(requestId)).map((l) => JSON.parse(l));
    expect(lines.some((l) => l.service === 'agents' && l.msg === 'agent created')).toBe(true);
    expect(lines.some((l) => l.service === 'gateway' && l.msg === 'request completed')).toBe(true);
  });
});
