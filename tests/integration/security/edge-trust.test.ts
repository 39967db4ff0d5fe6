import { connect } from '@nats-io/transport-node';
import { BusClient } from '@vab/bus';
import { Subjects } from '@vab/contracts';
import { request as httpRequest } from 'node:http';
import { connect as netConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { fullFlow, withNode } from '@vab/testkit';
import { startOpenAiStub, clinicScript } from '../../../services/playground/test/openai-stub.js';
import { api, sampleFlow, startStack, type Stack } from '../../helpers/stack.js';

// Issue 35's holes at the edge, as an attacker met them: guessing tokens, tickets for any path, deep or odd
// JSON, and the scheme's case. Every check goes through the real gateway.
const TOKEN = 'token-35';
const auth = { authorization: `Bearer ${TOKEN}` };
let stack: Stack;
let http: ReturnType<typeof api>;

beforeAll(async () => {
  stack = await startStack({
    security: { apiTokens: [TOKEN], authFailureLimitMax: 5, rateLimitWindowMs: 3000 },
  });
  http = api(stack.baseUrl);
});
afterAll(() => stack.close());

/** A GET from another loopback address (127.0.0.2): another caller as far as the gateway can tell. */
function getFrom(localAddress: string, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const req = httpRequest(`${stack.baseUrl}${path}`, { localAddress, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end();
    },
  );
}

describe('guessing tokens (item 3)', () => {
  it('answers 429 with Retry-After past the failures an address may make; other addresses and, later, that one go on', async () => {
    const from = '127.0.0.3';
    const statuses: number[] = [];
    for (const authorization of [
      'Bearer a',
      'Bearer b',
      'bearer c',
      '',
      'Basic eDp5',
      'Bearer d',
      'Bearer e',
    ]) {
      statuses.push((await getFrom(from, '/api/agents', authorization ? { authorization } : {})).status);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
    // while blocked, even the right token is refused from there: a right guess looks like a wrong one
    const blocked = await getFrom(from, '/api/agents', auth);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect(JSON.parse(blocked.body)).toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringContaining('at most 5 per 3 seconds'),
    });
    // another address is another caller
    expect((await getFrom('127.0.0.4', '/api/agents', auth)).status).toBe(200);
    // health stays open
    expect((await getFrom(from, '/healthz')).status).toBe(200);
    // after the window, the address is served again
    await expect
      .poll(async () => (await getFrom(from, '/api/agents', auth)).status, { timeout: 8000, interval: 500 })
      .toBe(200);
  });

  it('takes the scheme in any case (RFC 7235)', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR'])
      expect(
        (await getFrom('127.0.0.5', '/api/agents', { authorization: `${scheme} ${TOKEN}` })).status,
      ).toBe(200);
  });
});

describe('tickets (item 5)', () => {
  it('are made only for the paths that need one; /metrics and API paths answer 400 saying so', async () => {
    for (const path of ['/metrics', '/api/agents', '/api/env-keys', '/healthz', '/docs/']) {
      const res = await http.post('/api/tickets', { path }, auth);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'VALIDATION_FAILED' });
      expect(res.body.message).toContain(`no ticket is needed for ${path}`);
      expect(res.body.message).toContain('/api/agents/:id/test-sessions/:sessionId/events');
    }
    for (const path of [
      '/api/agents/a1/test-sessions/s1/events',
      '/api/agents/a1/test-sessions/s1/recording',
    ]) {
      expect((await http.post('/api/tickets', { path }, auth)).status).toBe(201);
    }
  });
});

describe('deep and odd JSON (items 6, 14)', () => {
  const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

  it('refuses a body nested past 64 levels with a 400 naming the limit, not a 500', async () => {
    const deep = `{"name":"deep","flow":{"nodes":[{"id":"n","data":${nested(4500)}}],"edges":[]}}`;
    const res = await http.post('/api/agents', deep, auth);
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('deeper than 64 levels');
    expect(res.body.issues[0].path).toMatch(/^body\.flow\.nodes\[0\]\.data(\.a)+$/);
    const array = await http.post('/api/agents', '['.repeat(100) + ']'.repeat(100), auth);
    expect(array.status).toBe(400);
    // 64 levels in all is accepted (the body's own object is the first)
    const ok = `{"name":"ok","flow":{"nodes":[{"id":"n","type":"x","data":${nested(60)}}],"edges":[]}}`;
    expect((await http.post('/api/agents', ok, auth)).status).toBe(201);
  });

  it('diffs a stored flow nested thousands deep (stored before the bound) without a 500', async () => {
    const created = await http.post('/api/agents', { name: 'deep store', flow: sampleFlow() }, auth);
    const id = created.body.id as string;
    const flow = sampleFlow();
    const node = flow.nodes[0] as Record<string, unknown>;
    let value: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 2500; i++) value = { a: value };
    node.settings = { deep: value };
    // the agents service's own subject: what a gateway without the bound let through
    const nc = await connect({ servers: stack.natsUrl });
    try {
      await new BusClient(nc).request(
        Subjects.agentsUpdate,
        { id, patch: { flow } },
        { timeoutMs: 5000, requestId: 'deep-35' },
      );
    } finally {
      await nc.close();
    }
    const diff = await http.get(`/api/agents/${id}/versions/1/diff/2`, auth);
    expect(diff.status).toBe(200);
    expect(diff.body.nodes.changed[0].fields.map((f: { name: string }) => f.name)).toContain('settings');
    const same = await http.get(`/api/agents/${id}/versions/2/diff/2`, auth);
    expect(same.status).toBe(200);
    expect(same.body.nodes.changed).toEqual([]);
  });

  it('refuses a number a double cannot hold, naming where, instead of storing null', async () => {
    const body = `{"name":"big","flow":{"nodes":[{"id":"n","type":"x","data":{"limit":1e400}}],"edges":[]}}`;
    const res = await http.post('/api/agents', body, auth);
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('body.flow.nodes[0].data.limit');
    expect(res.body.issues).toEqual([
      { path: 'body.flow.nodes[0].data.limit', message: 'number out of range' },
    ]);
    const negative = await http.post('/api/agents', '{"name":"n","x":[1,2,-2e999]}', auth);
    expect(negative.status).toBe(400);
    expect(negative.body.issues[0].path).toBe('body.x[2]');
    // small and ordinary numbers are kept as sent
    const fine = `{"name":"fine","flow":{"nodes":[{"id":"n","type":"x","data":{"a":1e-400,"b":1.5e300,"c":-3}}],"edges":[]}}`;
    expect((await http.post('/api/agents', fine, auth)).status).toBe(201);
  });

  it('takes bodies as UTF-8 only: another charset 415, invalid bytes 400', async () => {
    const post = (body: Buffer | string, contentType: string) =>
      fetch(`${stack.baseUrl}/api/agents`, {
        method: 'POST',
        headers: { ...auth, 'content-type': contentType },
        body,
      });
    const utf16 = await post(Buffer.from('{"name":"x"}', 'utf16le'), 'application/json; charset=utf-16');
    expect(utf16.status).toBe(415);
    expect(await utf16.json()).toMatchObject({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: expect.stringContaining('utf-16'),
    });
    const latin = await post(
      Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xe9, 0x22, 0x7d]),
      'application/json',
    );
    expect(latin.status).toBe(400);
    expect(await latin.json()).toMatchObject({
      code: 'INVALID_JSON',
      message: 'the request body is not valid UTF-8',
    });
    const declared = await post('{"name":"é"}', 'application/json; charset="UTF-8"');
    expect(declared.status).toBe(201);
  });
});

describe('the API reference page (item 14, issue 36)', () => {
  it('sends /docs/static/index.html?x to /docs/?x (not to itself) and lets the page set its inline styles only', async () => {
    const res = await fetch(`${stack.baseUrl}/docs/static/index.html?x=1`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/docs/?x=1');
    for (const path of ['/docs/', '/docs/static/swagger-ui-bundle.js', '/docs/json']) {
      const csp = (await fetch(`${stack.baseUrl}${path}`)).headers.get('content-security-policy')!;
      expect(csp).toMatch(/style-src 'self' 'unsafe-inline'(;|$)/);
      expect(csp).toMatch(/script-src 'self'(;|$)/);
      // nothing from elsewhere (the page works offline), and no https upgrade of a page served over http
      expect(csp).not.toMatch(/https:|upgrade-insecure-requests|swagger\.io/);
    }
  });
});

describe('connections that hold on (items 8, 14)', () => {
  let slow: Stack;
  let port: number;
  beforeAll(async () => {
    slow = await startStack({
      gateway: { REQUEST_RECEIVE_TIMEOUT_MS: 1000, MAX_CONNECTIONS_PER_ADDRESS: 4 },
    });
    port = Number(new URL(slow.baseUrl).port);
  });
  afterAll(() => slow.close());

  /** A raw connection: what it was answered (all of it, once the server closed it) and when it closed. */
  function raw(localAddress = '127.0.0.1') {
    const socket = netConnect({ host: '127.0.0.1', port, localAddress });
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (received += d));
    socket.on('error', () => undefined);
    const closed = new Promise<{ text: string; at: number }>((resolve) =>
      socket.once('close', () => resolve({ text: received, at: Date.now() })),
    );
    const connected = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    return { socket, closed, connected };
  }
  const bodyOf = (text: string) =>
    JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;

  it('cuts off a body that trickles, and one that stalls, with a 408 in the API’s error shape', async () => {
    const started = Date.now();
    const trickle = raw();
    const stall = raw();
    await Promise.all([trickle.connected, stall.connected]);
    const head = `POST /api/agents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n`;
    trickle.socket.write(head + '{');
    stall.socket.write(head + '{"name":');
    const timer = setInterval(() => trickle.socket.writable && trickle.socket.write(' '), 200);
    try {
      for (const { closed } of [trickle, stall]) {
        const { text, at } = await closed;
        expect(text).toMatch(/^HTTP\/1\.1 408 /);
        expect(bodyOf(text)).toMatchObject({ code: 'REQUEST_TIMEOUT', requestId: expect.any(String) });
        // 1 s to arrive, checked every 0.5 s
        expect(at - started).toBeLessThan(4000);
      }
    } finally {
      clearInterval(timer);
    }
  });

  it('answers malformed requests 400 and oversized headers 431 in the API’s error shape', async () => {
    const bad = raw();
    await bad.connected;
    bad.socket.write('NOT HTTP AT ALL\r\n\r\n');
    const badText = (await bad.closed).text;
    expect(badText).toMatch(/^HTTP\/1\.1 400 /);
    expect(bodyOf(badText)).toMatchObject({
      code: 'VALIDATION_FAILED',
      message: 'the request is not valid HTTP',
    });
    const big = raw();
    await big.connected;
    big.socket.write(`GET /api/agents HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    const bigText = (await big.closed).text;
    expect(bigText).toMatch(/^HTTP\/1\.1 431 /);
    expect(bodyOf(bigText)).toMatchObject({ code: 'HEADERS_TOO_LARGE' });
  });

  it('holds at most MAX_CONNECTIONS_PER_ADDRESS connections per address; others are served', async () => {
    const held = Array.from({ length: 4 }, () => raw('127.0.0.6'));
    await Promise.all(held.map((h) => h.connected));
    const extra = raw('127.0.0.6');
    const refused = await extra.closed;
    expect(refused.text).toBe('');
    // another address is served meanwhile
    const other = raw('127.0.0.7');
    await other.connected;
    other.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect((await other.closed).text).toMatch(/^HTTP\/1\.1 200 /);
    // one closed, one more may come
    held[0]!.socket.destroy();
    await held[0]!.closed;
    await expect
      .poll(async () => {
        const again = raw('127.0.0.6');
        again.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
        return (await again.closed).text.slice(0, 12);
      })
      .toBe('HTTP/1.1 200');
    for (const h of held) h.socket.destroy();
  });
});

describe('per-caller session quota (item 9)', () => {
  it("a test run's attempts hold its caller's slots: they wait while the caller's own sessions hold them", async () => {
    const stub = await startOpenAiStub(clinicScript);
    const q = await startStack({
      security: { apiTokens: ['caller-a', 'caller-b'] },
      playground: { MAX_SESSIONS_PER_CALLER: 1 },
      testRuns: { caseTimeoutMs: 20_000 },
    });
    const a = { authorization: 'Bearer caller-a' };
    const b = { authorization: 'Bearer caller-b' };
    try {
      const h = api(q.baseUrl);
      const flow = withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });
      const agent = (await h.post('/api/agents', { name: 'Runs', flow }, a)).body.id as string;
      expect(
        (await h.post(`/api/agents/${agent}/test-cases`, { name: 'hi', turns: ['Hello'] }, a)).status,
      ).toBe(201);
      const apiKeys = { openai: 'sk-x' };
      const held = await h.post(`/api/agents/${agent}/text-sessions`, { apiKeys }, a);
      expect(held.status).toBe(201);
      const run = (await h.post(`/api/agents/${agent}/test-runs`, { apiKeys }, a)).body.id as string;
      const theirs = (await h.post(`/api/agents/${agent}/test-runs`, { apiKeys }, b)).body.id as string;
      const verdict = async (id: string) =>
        (await h.get(`/api/agents/${agent}/test-runs/${id}`, a)).body.cases[0].verdict as string;
      // another caller's run goes on; this caller's waits for its slot
      await vi.waitFor(async () => expect(await verdict(theirs)).toBe('passed'), { timeout: 15_000 });
      // it waits queued (each retry of its start shows `running` for a moment, so the poll looks for queued)
      await vi.waitFor(async () => expect(await verdict(run)).toBe('queued'), { timeout: 15_000 });
      expect(await verdict(run)).not.toBe('passed');
      const sessionId = held.body.sessionId as string;
      await h.delete(`/api/agents/${agent}/text-sessions/${sessionId}`, undefined, a);
      await vi.waitFor(async () => expect(await verdict(run)).toBe('passed'), { timeout: 15_000 });
    } finally {
      await q.close();
      await stub.close();
    }
  });

  it('counts a caller across playground instances; a crashed instance frees its slots within the lease', async () => {
    const stub = await startOpenAiStub(clinicScript);
    // two sessions fill an instance (it leaves the start queue), so a third start reaches the other one
    const q = await startStack({
      security: { apiTokens: ['caller-a'] },
      playground: { MAX_SESSIONS_PER_CALLER: 2, MAX_SESSIONS: 2, CALLER_SLOT_LEASE_MS: 1500 },
    });
    const a = { authorization: 'Bearer caller-a' };
    try {
      const h = api(q.baseUrl);
      const flow = withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });
      const agent = (await h.post('/api/agents', { name: 'Quota', flow }, a)).body.id as string;
      const start = () => h.post(`/api/agents/${agent}/text-sessions`, { apiKeys: { openai: 'sk-x' } }, a);
      expect((await start()).status).toBe(201);
      expect((await start()).status).toBe(201);
      const second = await q.addPlayground();
      // the first instance is full: this start is the second instance's, where the caller holds nothing
      const refused = await start();
      expect(refused.status).toBe(429);
      expect(refused.body.message).toContain('at most 2 sessions may be open at once per caller');
      // the first instance dies without a word: its slots are free once their lease runs out
      await q.services.playground.crash();
      await vi.waitFor(async () => expect((await start()).status).toBe(201), {
        timeout: 10_000,
        interval: 500,
      });
      await second.stop();
    } finally {
      await q.close();
      await stub.close();
    }
  });

  it('holds each caller to MAX_SESSIONS_PER_CALLER open sessions, through any gateway; other callers go on', async () => {
    const stub = await startOpenAiStub(clinicScript);
    const q = await startStack({
      security: { apiTokens: ['caller-a', 'caller-b'] },
      playground: { MAX_SESSIONS_PER_CALLER: 2 },
      events: { maxStreamsPerClient: 1 },
    });
    const other = await q.addGateway();
    const a = { authorization: 'Bearer caller-a' };
    const b = { authorization: 'Bearer caller-b' };
    try {
      const h = api(q.baseUrl);
      const flow = withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });
      const agent = (await h.post('/api/agents', { name: 'Quota', flow }, a)).body.id as string;
      const start = (via: string, who: Record<string, string>) =>
        api(via).post(`/api/agents/${agent}/text-sessions`, { apiKeys: { openai: 'sk-x' } }, who);
      const first = await start(q.baseUrl, a);
      expect(first.status).toBe(201);
      expect((await start(other.baseUrl, a)).status).toBe(201);
      // the third, through either gateway: the count is the playground's, not a gateway's
      for (const via of [q.baseUrl, other.baseUrl]) {
        const refused = await start(via, a);
        expect(refused.status).toBe(429);
        expect(refused.body).toMatchObject({
          code: 'RATE_LIMITED',
          message: expect.stringContaining('at most 2 sessions may be open at once per caller'),
        });
      }
      // another caller is not affected
      expect((await start(q.baseUrl, b)).status).toBe(201);
      // event streams count per caller too (one each here), from the same address; a ticket's counts for its maker
      const events = `/api/agents/${agent}/test-sessions/${first.body.sessionId as string}/events`;
      const mine = await fetch(q.baseUrl + events, { headers: a });
      expect(mine.status).toBe(200);
      expect((await fetch(q.baseUrl + events, { headers: a })).status).toBe(429);
      const ticket = (await h.post('/api/tickets', { path: events }, a)).body.ticket as string;
      expect((await fetch(`${q.baseUrl}${events}?ticket=${encodeURIComponent(ticket)}`)).status).toBe(429);
      const theirs = await fetch(q.baseUrl + events, { headers: b });
      expect(theirs.status).toBe(200);
      await mine.body!.cancel();
      await theirs.body!.cancel();
      // one ended: room for one more
      const sessionId = first.body.sessionId as string;
      expect((await h.delete(`/api/agents/${agent}/text-sessions/${sessionId}`, undefined, a)).status).toBe(
        200,
      );
      expect((await start(q.baseUrl, a)).status).toBe(201);
    } finally {
      await other.close();
      await q.close();
      await stub.close();
    }
  });
});
