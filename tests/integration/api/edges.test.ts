import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, sampleFlow, startStack, type Stack } from '../../helpers/stack.js';

// What a front end meets at the edge of the API: typos, read-only fields sent back, wrong methods, limits.
let stack: Stack;
let http: ReturnType<typeof api>;

beforeAll(async () => {
  stack = await startStack({
    bodyLimitBytes: 64 * 1024,
    security: { sessionRateLimitMax: 2, rateLimitWindowMs: 60_000 },
    gateway: { PUBLIC_URL: 'https://api.example.test/' },
  });
  http = api(stack.baseUrl);
});
afterAll(() => stack.close());

const newAgent = async (name = 'Edges') =>
  (await http.post('/api/agents', { name, flow: sampleFlow() })).body.id as string;

describe('strict bodies', () => {
  it('refuse a misspelt field by name, and change nothing', async () => {
    const id = await newAgent();
    const res = await http.patch(`/api/agents/${id}`, { nmae: 'x' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: 'VALIDATION_FAILED',
      message: 'unknown field "nmae"',
      issues: [{ path: 'body.nmae', message: 'unknown field "nmae"' }],
    });
    expect((await http.get(`/api/agents/${id}`)).body).toMatchObject({ name: 'Edges', version: 1 });
    const ticket = await http.post('/api/tickets', { pth: '/api/agents' });
    expect(ticket.status).toBe(400);
    expect(ticket.body.message).toBe('unknown field "pth"');
    expect((await http.post('/api/tickets', { path: 'api/agents?x=1' })).status).toBe(400);
    const create = await http.post('/api/agents', { name: 'x', flwo: { nodes: [], edges: [] } });
    expect(create.status).toBe(400);
    expect(create.body.message).toBe('unknown field "flwo"');
  });

  it('accept the whole object sent back (read-only fields ignored), and keep what is inside a flow as sent', async () => {
    const id = await newAgent();
    const agent = (await http.get(`/api/agents/${id}`)).body;
    const flow = {
      ...agent.flow,
      viewport: { x: 1, y: 2, zoom: 1.5 },
      nodes: [...agent.flow.nodes, { id: 'note', data: { label: 'sticky' }, anything: [1, null] }],
    };
    const saved = await http.patch(`/api/agents/${id}`, { ...agent, name: 'Whole object', flow });
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({ id, name: 'Whole object', version: 2, createdAt: agent.createdAt });
    expect(saved.body.updatedAt).toBeGreaterThanOrEqual(agent.updatedAt);
    expect(saved.body.flow).toEqual(flow);

    // the spec's own shapes pass as written, with each resource's read-only fields sent back
    const session = (await http.post(`/api/agents/${id}/test-sessions`, { sessionType: 'voice' })).body;
    const message = { role: 'user', content: 'Hi', stepId: 'start-1', timestamp: Date.now() };
    expect((await http.post(`/api/agents/${id}/test-sessions/${session.id}/messages`, message)).status).toBe(
      201,
    );
    const close = { ...session, endedAt: session.startedAt + 1000, durationMs: 1000 };
    const closed = await http.patch(`/api/agents/${id}/test-sessions/${session.id}`, close);
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ status: 'closed', durationMs: 1000 });
    const entry = await http.post(`/api/agents/${id}/conversations`, {
      role: 'user',
      content: 'Add a greeting',
      operations: [{ type: 'add_node', node: { id: 'n', custom: true } }],
    });
    expect(entry.status).toBe(201);
    const deploy = (await http.post(`/api/agents/${id}/deploys`, { external: true })).body;
    expect(
      (await http.patch(`/api/agents/${id}/deploys/${deploy.id}`, { ...deploy, status: 'building' })).status,
    ).toBe(200);
    const testCase = (await http.post(`/api/agents/${id}/test-cases`, { name: 'c', turns: ['Hi'] })).body;
    const edited = await http.patch(`/api/agents/${id}/test-cases/${testCase.id}`, {
      ...testCase,
      name: 'd',
    });
    expect(edited.status).toBe(200);
    expect(edited.body.name).toBe('d');

    // and a typo anywhere at the top level is named
    for (const [path, body] of [
      [`/api/agents/${id}/test-sessions/${session.id}/messages`, { ...message, stepID: 'x' }],
      [`/api/agents/${id}/test-cases`, { name: 'c', turns: ['Hi'], expects: {} }],
      [`/api/agents/${id}/conversations`, { role: 'user', content: 'x', operation: [] }],
    ] as const) {
      const res = await http.post(path, body);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/^unknown field "(stepID|expects|operation)"$/);
    }
    // a flow's own top level (validation, the playground) stays lenient: a canvas adds its fields there
    const validated = await http.post('/api/flows/validate', { ...sampleFlow(), viewport: { zoom: 1 } });
    expect(validated.status).toBe(200);
  });
});

describe('test cases of an agent that is unknown or archived', () => {
  it('answer 404 on every route for an unknown agent, and 409 on writes for an archived one', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    for (const [method, path, body] of [
      ['GET', `/api/agents/${unknown}/test-cases`, undefined],
      ['POST', `/api/agents/${unknown}/test-cases`, { name: 'c', turns: ['Hi'] }],
      ['GET', `/api/agents/${unknown}/test-cases/${unknown}`, undefined],
      ['PATCH', `/api/agents/${unknown}/test-cases/${unknown}`, { name: 'x' }],
      ['DELETE', `/api/agents/${unknown}/test-cases/${unknown}`, undefined],
    ] as const) {
      expect((await http.raw(method, path, body)).status, `${method} ${path}`).toBe(404);
    }
    const id = await newAgent('Archived');
    const testCase = (await http.post(`/api/agents/${id}/test-cases`, { name: 'c', turns: ['Hi'] })).body;
    await http.delete(`/api/agents/${id}`);
    const patch = await http.patch(`/api/agents/${id}/test-cases/${testCase.id}`, { name: 'x' });
    expect(patch.status).toBe(409);
    expect(patch.body.code).toBe('AGENT_ARCHIVED');
    const del = await http.delete(`/api/agents/${id}/test-cases/${testCase.id}`);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('AGENT_ARCHIVED');
    // still readable, unchanged
    expect((await http.get(`/api/agents/${id}/test-cases/${testCase.id}`)).body.name).toBe('c');
  });
});

describe('methods, limits and the document', () => {
  it('answers 405 with Allow for a path served with other methods, 404 for no such path', async () => {
    const res = await fetch(`${stack.baseUrl}/api/agents`, { method: 'PUT' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD, POST');
    expect(await res.json()).toMatchObject({ code: 'METHOD_NOT_ALLOWED' });
    const gate = await fetch(`${stack.baseUrl}/api/agents/some-id/deploy-gate`, { method: 'POST' });
    expect(gate.status).toBe(405);
    expect(gate.headers.get('allow')).toBe('GET, HEAD, PUT');
    expect((await fetch(`${stack.baseUrl}/api/nothing-here`)).status).toBe(404);
  });

  it('says the body limit in a 413', async () => {
    const res = await http.post('/api/agents', {
      name: 'big',
      flow: { nodes: [], edges: [], pad: 'x'.repeat(70_000) },
    });
    expect(res.status).toBe(413);
    expect(res.body.message).toContain(`${64 * 1024} bytes`);
  });

  it('answers a body far over the limit with a 413 the client reads, not a reset', async () => {
    /** As curl and fetch do: the whole body sent first (each write waited for), then the answer read. */
    const send = (size: number, chunked: boolean) =>
      new Promise<{ writeError: string | undefined; status: number; body: string }>((resolve) => {
        const url = new URL(stack.baseUrl);
        const socket = connect(Number(url.port), url.hostname);
        // nothing is read until the body has been written
        socket.pause();
        let writeError: string | undefined;
        let answer = Buffer.alloc(0);
        const done = () => {
          const text = answer.toString();
          const at = text.indexOf('\r\n\r\n');
          resolve({ writeError, status: Number(text.split(' ')[1]), body: text.slice(at + 4) });
          socket.destroy();
        };
        socket.on('error', (err: NodeJS.ErrnoException) => (writeError ??= err.code ?? err.message));
        socket.on('close', done);
        socket.on('data', (d: Buffer) => {
          answer = Buffer.concat([answer, d]);
          const text = answer.toString();
          const at = text.indexOf('\r\n\r\n');
          const length = /content-length: (\d+)/i.exec(text)?.[1];
          // a kept-alive connection: the answer is whole once its declared length arrived
          if (at >= 0 && length !== undefined && answer.length >= at + 4 + Number(length)) done();
        });
        const body = Buffer.alloc(size, 0x20);
        socket.write(
          `POST /api/agents HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n` +
            (chunked ? 'Transfer-Encoding: chunked\r\n\r\n' : `Content-Length: ${size}\r\n\r\n`),
        );
        if (chunked) socket.write(`${size.toString(16)}\r\n`);
        socket.write(body);
        socket.write(chunked ? '\r\n0\r\n\r\n' : '', () => socket.resume());
      });
    for (const chunked of [false, true]) {
      for (let i = 0; i < 3; i++) {
        const res = await send(5 * 1024 * 1024, chunked);
        expect(res.writeError, `chunked: ${chunked}`).toBeUndefined();
        expect(res.status).toBe(413);
        expect(JSON.parse(res.body)).toMatchObject({
          code: 'PAYLOAD_TOO_LARGE',
          message: expect.stringContaining(`${64 * 1024} bytes`) as string,
        });
      }
    }
  });

  it('counts test runs against the session-start limit, and its 429 says the window', async () => {
    const id = await newAgent('Limited');
    await http.post(`/api/agents/${id}/test-cases`, { name: 'c', turns: ['Hi'] });
    const statuses: number[] = [];
    let limited: { code: string; message: string } | undefined;
    for (let i = 0; i < 3; i++) {
      const res = await http.post(`/api/agents/${id}/test-runs`, {});
      statuses.push(res.status);
      if (res.status === 429) limited = res.body;
    }
    expect(statuses).toEqual([202, 202, 429]);
    expect(limited?.message).toMatch(
      /^too many requests: at most 2 per minute; retry in \d+ (seconds?|minute)$/,
    );
  });

  it('names PUBLIC_URL as the server of its document', async () => {
    const doc = (await http.get('/openapi.json')).body;
    expect(doc.servers).toEqual([{ url: 'https://api.example.test', description: 'This API (PUBLIC_URL)' }]);
  });
});
