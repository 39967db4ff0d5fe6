import { createServer, type Server } from 'node:http';
import { launchChromium, listenOnLoopback } from '@vab/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { startStack, type Stack } from '../../helpers/stack.js';

// A builder page on another origin, in a real browser: what CORS lets through and how it opens a socket.
const TOKEN = 'browser-token-0123456789';
let upstream: Server;
let pageServer: Server;
let pageOrigin = '';
let stack: Stack;
let browser: Browser;
let page: Page;
const upstreamUrls: string[] = [];

beforeAll(async () => {
  upstream = createServer((_req, res) => res.writeHead(404).end());
  new WebSocketServer({ server: upstream }).on('connection', (socket, req) => {
    upstreamUrls.push(req.url ?? '');
    socket.on('message', (m) => socket.send(`echo: ${m.toString()}`));
  });
  const upstreamPort = await listenOnLoopback(upstream);
  pageServer = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>builder</title>'),
  );
  pageOrigin = `http://127.0.0.1:${await listenOnLoopback(pageServer)}`;
  stack = await startStack({
    upstream: { url: `http://127.0.0.1:${upstreamPort}` },
    security: { apiTokens: [TOKEN], corsOrigins: [pageOrigin] },
  });
  browser = await launchChromium();
  page = await browser.newPage();
  await page.goto(pageOrigin);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
  for (const s of [upstream, pageServer]) {
    s?.closeAllConnections();
    await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
  }
});

/** fetch() in the page, with the bearer token: the status, or the browser's error (a CORS refusal). */
function call(method: string, path: string, body?: unknown) {
  return page.evaluate(
    async ({ base, token, method, path, body }) => {
      try {
        const res = await fetch(base + path, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      } catch (err) {
        return { error: String(err) };
      }
    },
    { base: stack.baseUrl, token: TOKEN, method, path, body },
  );
}

describe('a builder page on another origin, in Chromium', () => {
  it('may send every method the API serves (CORS), and caches the preflight', async () => {
    const created = await call('POST', '/api/agents', { name: 'From the browser' });
    expect(created).toMatchObject({ status: 201 });
    const id = String(created.body?.id);
    expect(await call('GET', `/api/agents/${id}`)).toMatchObject({ status: 200 });
    expect(await call('PATCH', `/api/agents/${id}`, { name: 'Renamed' })).toMatchObject({
      status: 200,
      body: { name: 'Renamed' },
    });
    expect(await call('PUT', `/api/agents/${id}/deploy-gate`, { enabled: true })).toMatchObject({
      status: 200,
      body: { enabled: true },
    });
    expect(await call('DELETE', `/api/agents/${id}`)).toMatchObject({
      status: 200,
      body: { archived: true },
    });

    const preflight = await fetch(`${stack.baseUrl}/api/agents/${id}/deploy-gate`, {
      method: 'OPTIONS',
      headers: {
        origin: pageOrigin,
        'access-control-request-method': 'PUT',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(preflight.status).toBe(204);
    const allowed = preflight.headers.get('access-control-allow-methods')!.split(/,\s*/);
    for (const m of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) expect(allowed).toContain(m);
    expect(preflight.headers.get('access-control-max-age')).toBe('600');
  });

  it('opens a proxied WebSocket with a single-use ticket; the same ticket a second time is refused', async () => {
    const outcome = await page.evaluate(
      async ({ base, token }) => {
        const minted = await fetch(`${base}/api/tickets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ path: '/legacy/socket' }),
        });
        const { ticket } = (await minted.json()) as { ticket: string };
        const url = `${base.replace('http', 'ws')}/legacy/socket?ticket=${encodeURIComponent(ticket)}`;
        const first = await new Promise<string>((resolve) => {
          const ws = new WebSocket(url);
          ws.onopen = () => ws.send('hello from the page');
          ws.onmessage = (e) => {
            resolve(String(e.data));
            ws.close();
          };
          ws.onerror = () => resolve('error');
        });
        const second = await new Promise<string>((resolve) => {
          const ws = new WebSocket(url);
          ws.onopen = () => resolve('open');
          ws.onerror = () => resolve('refused');
        });
        return { status: minted.status, first, second };
      },
      { base: stack.baseUrl, token: TOKEN },
    );
    expect(outcome).toEqual({ status: 201, first: 'echo: hello from the page', second: 'refused' });
    expect(upstreamUrls).toEqual(['/legacy/socket']);
    expect(stack.logs.some((l) => l.includes('"url":"/legacy/socket"') && l.includes('"status":401'))).toBe(
      true,
    );
  });
});
