import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { listenOnLoopback } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { api, startStack, type Stack } from '../../helpers/stack.js';

const TOKEN = 'proxy-token-0123456789';
let upstream: Server;
let upstreamUrl = '';
const seen: { method: string; url: string; requestId: string | undefined; auth: string | undefined }[] = [];
let stack: Stack;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    seen.push({
      method: req.method ?? '',
      url: req.url ?? '',
      requestId: req.headers['x-request-id'] as string | undefined,
      auth: req.headers.authorization,
    });
    if (req.url === '/legacy/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let n = 0;
      const tick = setInterval(() => {
        res.write(`data: ${n}\n\n`);
        if (++n === 3) {
          clearInterval(tick);
          res.end();
        }
      }, 150);
      return;
    }
    if (req.url === '/legacy/slow') {
      setTimeout(() => res.writeHead(200).end('late'), 2000);
      return;
    }
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res
        .writeHead(req.url === '/legacy/created' ? 201 : 200, {
          'content-type': 'application/json',
          'x-legacy': 'yes',
        })
        .end(
          JSON.stringify({
            method: req.method,
            url: req.url,
            body,
            type: req.headers['content-type'] ?? null,
          }),
        );
    });
  });
  const wss = new WebSocketServer({ server: upstream });
  wss.on('connection', (socket, req) => {
    seen.push({
      method: 'WS',
      url: req.url ?? '',
      requestId: req.headers['x-request-id'] as string | undefined,
      auth: req.headers.authorization,
    });
    socket.on('message', (m) => socket.send(`echo: ${m.toString()}`));
  });
  upstreamUrl = `http://127.0.0.1:${await listenOnLoopback(upstream)}`;
  stack = await startStack({
    upstream: { url: upstreamUrl, timeoutMs: 500 },
    security: { apiTokens: [TOKEN], rateLimitMax: 40, rateLimitWindowMs: 60_000 },
  });
});
afterAll(async () => {
  await stack.close();
  upstream.closeAllConnections();
  await new Promise<void>((r) => upstream.close(() => r()));
});

const auth = { authorization: `Bearer ${TOKEN}` };

describe('UPSTREAM_URL: what the route table does not serve goes to the backend beside this one', () => {
  it('proxies any method and path outside the routes, bodies of any type, with the request id', async () => {
    const get = await fetch(`${stack.baseUrl}/legacy/hello?x=1`, {
      headers: { ...auth, 'x-request-id': 'trace-7' },
    });
    expect(get.status).toBe(200);
    expect(get.headers.get('x-legacy')).toBe('yes');
    expect(get.headers.get('x-request-id')).toBe('trace-7');
    expect(await get.json()).toMatchObject({ method: 'GET', url: '/legacy/hello?x=1' });
    // our bearer token is ours: the upstream never receives it
    expect(seen.at(-1)).toMatchObject({ requestId: 'trace-7', auth: undefined });

    const post = await fetch(`${stack.baseUrl}/legacy/created`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'text/plain' },
      body: 'name=x',
    });
    expect(post.status).toBe(201);
    expect(await post.json()).toMatchObject({ body: 'name=x', type: 'text/plain' });

    // a method the API does not have on one of its paths is the upstream's too
    const put = await fetch(`${stack.baseUrl}/api/agents/some-id`, { method: 'PUT', headers: auth });
    expect(await put.json()).toMatchObject({ method: 'PUT', url: '/api/agents/some-id' });
    // the API's own routes stay the API's
    expect((await api(stack.baseUrl).get('/api/agents', auth)).status).toBe(200);
    expect(seen.some((s) => s.url === '/api/agents')).toBe(false);
  });

  it('streams an answer as the upstream sends it', async () => {
    const res = await fetch(`${stack.baseUrl}/legacy/stream`, { headers: auth });
    const reader = res.body!.getReader();
    const first = await reader.read();
    const at = Date.now();
    expect(new TextDecoder().decode(first.value)).toBe('data: 0\n\n');
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read())
      rest += new TextDecoder().decode(r.value);
    expect(rest).toBe('data: 1\n\ndata: 2\n\n');
    expect(Date.now() - at).toBeGreaterThanOrEqual(200); // the first chunk came before the last was written
  });

  it('proxies WebSocket upgrades, behind the same tokens', async () => {
    const open = (headers: Record<string, string>) =>
      new Promise<WebSocket>((resolve, reject) => {
        const ws = new WebSocket(`${stack.baseUrl.replace('http', 'ws')}/legacy/socket`, { headers });
        ws.once('open', () => resolve(ws));
        ws.once('unexpected-response', (_req, res) => reject(new Error(`status ${res.statusCode}`)));
        ws.once('error', reject);
      });
    await expect(open({})).rejects.toThrow('status 401');
    const ws = await open({ ...auth, 'x-request-id': 'ws-trace-1' });
    const reply = new Promise<string>((r) => ws.once('message', (m) => r(m.toString())));
    ws.send('hi');
    expect(await reply).toBe('echo: hi');
    expect(seen.at(-1)).toMatchObject({ method: 'WS', requestId: 'ws-trace-1', auth: undefined });
    // the wait is the test: the access line says how long the socket was open
    await new Promise((r) => setTimeout(r, 300));
    ws.close();
    await new Promise<void>((r) => ws.once('close', () => r()));
    // the upgrade is in the access log once the socket closes: 101, and how long it was open
    await expect
      .poll(() =>
        stack.logs.find((l) => l.includes('"requestId":"ws-trace-1"') && l.includes('"status":101')),
      )
      .toBeDefined();
    const line = JSON.parse(
      stack.logs.find((l) => l.includes('"requestId":"ws-trace-1"') && l.includes('"status":101'))!,
    ) as { url: string; ms: number };
    expect(line.url).toBe('/legacy/socket');
    expect(line.ms).toBeGreaterThanOrEqual(300);
  });

  it('lets a WebSocket in with a single-use ticket, which never reaches the upstream or a log line', async () => {
    const minted = await fetch(`${stack.baseUrl}/api/tickets`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ path: '/legacy/socket' }),
    });
    expect(minted.status).toBe(201);
    const { ticket, expiresAt } = (await minted.json()) as { ticket: string; expiresAt: number };
    expect(expiresAt).toBeGreaterThan(Date.now());
    const url = (query: string) => `${stack.baseUrl.replace('http', 'ws')}/legacy/socket?${query}`;
    const open = (query: string) =>
      new Promise<WebSocket>((resolve, reject) => {
        const ws = new WebSocket(url(query));
        ws.once('open', () => resolve(ws));
        ws.once('unexpected-response', (_req, res) => reject(new Error(`status ${res.statusCode}`)));
        ws.once('error', reject);
      });
    const ws = await open(`room=7&ticket=${encodeURIComponent(ticket)}&q=a%20b`);
    const reply = new Promise<string>((r) => ws.once('message', (m) => r(m.toString())));
    ws.send('with a ticket');
    expect(await reply).toBe('echo: with a ticket');
    expect(seen.at(-1)).toMatchObject({ method: 'WS', url: '/legacy/socket?room=7&q=a%20b' });
    ws.close();
    // used up, on this gateway and (the KV bucket) on any other
    await expect(open(`ticket=${encodeURIComponent(ticket)}`)).rejects.toThrow('status 401');
    await expect(open('ticket=v1.forged.mac')).rejects.toThrow('status 401');
    // a ticket opens only the path it was made for
    const other = await fetch(`${stack.baseUrl}/api/tickets`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ path: '/legacy/other' }),
    });
    const wrongPath = (await other.json()) as { ticket: string };
    await expect(open(`ticket=${encodeURIComponent(wrongPath.ticket)}`)).rejects.toThrow('status 401');
    // over HTTP too (an EventSource is a GET), with the same shape of refusal
    const streamed = await fetch(
      `${stack.baseUrl}/legacy/other?ticket=${encodeURIComponent(wrongPath.ticket)}`,
    );
    expect(streamed.status).toBe(200);
    expect(seen.at(-1)).toMatchObject({ url: '/legacy/other', auth: undefined });
    const again = await fetch(`${stack.baseUrl}/legacy/other?ticket=${encodeURIComponent(wrongPath.ticket)}`);
    expect(again.status).toBe(401);
    expect(await again.json()).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(stack.logs.some((l) => l.includes(ticket) || l.includes(wrongPath.ticket))).toBe(false);
  });

  it("applies the gateway's auth, rate limit and access log, and answers upstream failures in its own shape", async () => {
    const denied = await api(stack.baseUrl).get('/legacy/hello');
    expect(denied.status).toBe(401);
    expect(denied.body.code).toBe('UNAUTHORIZED');
    expect(
      stack.logs.some((l) => l.includes('"url":"/legacy/hello"') && l.includes('request completed')),
    ).toBe(true);

    const slow = await fetch(`${stack.baseUrl}/legacy/slow`, { headers: auth });
    expect(slow.status).toBe(504);
    expect(await slow.json()).toMatchObject({ code: 'TIMEOUT', requestId: slow.headers.get('x-request-id') });

    let limited: Response | undefined;
    for (let i = 0; i < 60 && !limited; i++) {
      const res = await fetch(`${stack.baseUrl}/legacy/hello`, { headers: auth });
      if (res.status === 429) limited = res;
    }
    expect(limited).toBeDefined();
    expect(await limited!.json()).toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('serves the API document as committed: proxied paths are not operations of this API', async () => {
    const committed = JSON.parse(
      readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'openapi.json'), 'utf8'),
    ) as unknown;
    const served = await (await fetch(`${stack.baseUrl}/openapi.json`)).json();
    expect(served).toEqual(committed);
    expect((served as { servers: unknown }).servers).toEqual([
      { url: '/', description: 'The origin that serves this document' },
    ]);
  });

  it('answers 502 in its own shape when the upstream is down, an upgrade too (before accepting it), and 404 without an upstream', async () => {
    const down = await startStack({ upstream: { url: 'http://127.0.0.1:9' } });
    try {
      const res = await fetch(`${down.baseUrl}/legacy/hello`);
      expect(res.status).toBe(502);
      const body = await res.json();
      expect(body).toMatchObject({ code: 'UPSTREAM_FAILED' });
      expect(JSON.stringify(body)).not.toContain('127.0.0.1');

      const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const ws = new WebSocket(`${down.baseUrl.replace('http', 'ws')}/legacy/socket`);
        ws.once('open', () => reject(new Error('the upgrade was accepted')));
        ws.once('unexpected-response', (_req, r) => {
          let text = '';
          r.on('data', (c: Buffer) => (text += c.toString()));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, body: text }));
        });
        ws.once('error', reject);
      });
      expect(refused.status).toBe(502);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'UPSTREAM_FAILED' });
      expect(refused.body).not.toContain('127.0.0.1');
    } finally {
      await down.close();
    }
    const forwarding = await startStack({
      upstream: { url: upstreamUrl },
      security: { apiTokens: [TOKEN] },
      gateway: { UPSTREAM_FORWARD_AUTHORIZATION: true },
    });
    try {
      expect((await fetch(`${forwarding.baseUrl}/legacy/hello`, { headers: auth })).status).toBe(200);
      expect(seen.at(-1)).toMatchObject({ url: '/legacy/hello', auth: `Bearer ${TOKEN}` });
    } finally {
      await forwarding.close();
    }
    const none = await startStack();
    try {
      expect((await fetch(`${none.baseUrl}/legacy/hello`)).status).toBe(404);
    } finally {
      await none.close();
    }
  });
});
