import { connect } from '@nats-io/transport-node';
import { createLogger } from '@vab/service-kit';
import { buildGateway } from '@vab/gateway';
import { startLocalRedis } from '@vab/testkit';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { api, startStack } from '../../helpers/stack.js';

describe('API tokens', () => {
  it('require a valid bearer token on /api/* and leave health and docs open', async () => {
    const stack = await startStack({ security: { apiTokens: ['token-one', 'token-two'] } });
    const http = api(stack.baseUrl);
    try {
      for (const headers of <Record<string, string>[]>[
        {},
        { authorization: 'Bearer wrong' },
        { authorization: 'token-one' },
        { authorization: 'Bearer ' },
      ]) {
        const res = await http.get('/api/agents', headers);
        expect(res.status).toBe(401);
        expect(res.body).toEqual({
          code: 'UNAUTHORIZED',
          message: 'authentication required',
          requestId: expect.any(String),
        });
      }
      expect((await http.post('/api/agents', { name: 'x' })).status).toBe(401);
      expect((await http.get('/api/agents')).status).toBe(401);
      expect((await http.get('/api/agents', { authorization: 'Bearer token-two' })).status).toBe(200);
      expect(
        (await http.post('/api/agents', { name: 'ok' }, { authorization: 'Bearer token-one' })).status,
      ).toBe(201);
      for (const open of ['/healthz', '/readyz', '/openapi.json', '/docs/'])
        expect((await http.get(open)).status).toBe(200);
      // the metrics are the operator's: a scraper sends a token like any other caller
      expect((await fetch(`${stack.baseUrl}/metrics`)).status).toBe(401);
      const scraped = await fetch(`${stack.baseUrl}/metrics`, {
        headers: { authorization: 'Bearer token-one' },
      });
      expect(scraped.status).toBe(200);
      const text = await scraped.text();
      expect(text).toMatch(/http_server_request_duration_seconds_count\{http_route="\/api\/agents"/);
      expect(text).not.toContain('token-one');
      expect(stack.logs.some((l) => l.includes('API_TOKENS is not set'))).toBe(false);
    } finally {
      await stack.close();
    }
  });

  it('when unset, the gateway warns once at start that the API is open', async () => {
    const stack = await startStack();
    try {
      expect(stack.logs.filter((l) => l.includes('API_TOKENS is not set'))).toHaveLength(1);
    } finally {
      await stack.close();
    }
  });
});

describe('CORS and security headers', () => {
  it('answers allowed origins only, preflight included, and sets security headers', async () => {
    const stack = await startStack({ security: { corsOrigins: ['https://builder.example'] } });
    try {
      const allowed = await fetch(`${stack.baseUrl}/api/agents`, {
        headers: { origin: 'https://builder.example' },
      });
      expect(allowed.headers.get('access-control-allow-origin')).toBe('https://builder.example');
      expect(allowed.headers.get('access-control-expose-headers')).toContain('etag');
      const other = await fetch(`${stack.baseUrl}/api/agents`, {
        headers: { origin: 'https://evil.example' },
      });
      expect(other.headers.get('access-control-allow-origin')).toBeNull();
      const preflight = await fetch(`${stack.baseUrl}/api/agents/x`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://builder.example',
          'access-control-request-method': 'PATCH',
          'access-control-request-headers': 'if-match,content-type',
        },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-methods')).toContain('PATCH');
      expect(preflight.headers.get('access-control-allow-headers')).toContain('if-match');
      // API answers: OWASP's REST set, not the HTML-document headers
      expect(allowed.headers.get('x-content-type-options')).toBe('nosniff');
      expect(allowed.headers.get('x-frame-options')).toBe('DENY');
      expect(allowed.headers.get('content-security-policy')).toBe("frame-ancestors 'none'");
      expect(allowed.headers.get('cache-control')).toBe('no-store');
      expect(allowed.headers.get('strict-transport-security')).toContain('max-age');
      expect(allowed.headers.get('x-dns-prefetch-control')).toBeNull();
      expect(allowed.headers.get('x-ratelimit-remaining')).toBeNull();
      const missing = await fetch(`${stack.baseUrl}/api/nothing-here`);
      expect(missing.status).toBe(404);
      expect(missing.headers.get('x-frame-options')).toBe('DENY');
      // the docs page (HTML) keeps helmet's document headers
      const page = await fetch(`${stack.baseUrl}/docs/`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toContain('text/html');
      expect(page.headers.get('x-frame-options')).toBe('SAMEORIGIN');
      expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    } finally {
      await stack.close();
    }
  });
});

describe('rate limits', () => {
  it('answer 429 with Retry-After past the limit, stricter on session starts, never on health', async () => {
    const stack = await startStack({
      security: {
        rateLimitMax: 5,
        sessionRateLimitMax: 2,
        rateLimitWindowMs: 60_000,
        apiTokens: ['one', 'someone'],
      },
    });
    const http = api(stack.baseUrl);
    const one = { authorization: 'Bearer one' };
    try {
      for (let i = 0; i < 5; i++) expect((await http.get('/api/agents', one)).status).toBe(200);
      const limited = await http.get('/api/agents', one);
      expect(limited.status).toBe(429);
      expect(limited.body.code).toBe('RATE_LIMITED');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(limited.headers.get('x-ratelimit-limit')).toBe('5');
      expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
      for (let i = 0; i < 10; i++) expect((await http.get('/healthz')).status).toBe(200);
      // another caller (a token) has its own budget; session starts have a smaller one
      const auth = { authorization: 'Bearer someone' };
      expect((await http.post('/api/agent-session', { edges: [] }, auth)).status).toBe(400);
      expect((await http.post('/api/agent-session', { edges: [] }, auth)).status).toBe(400);
      expect((await http.post('/api/agent-session', { edges: [] }, auth)).status).toBe(429);
    } finally {
      await stack.close();
    }
  });

  it('hold across gateway instances that share a Redis', async () => {
    const redisServer = await startLocalRedis();
    const shared = () => new Redis(redisServer.url, { maxRetriesPerRequest: 1 });
    const r1 = shared();
    const r2 = shared();
    const stack = await startStack({ security: { rateLimitMax: 4, rateLimitRedis: r1 } });
    const nc = await connect({ servers: stack.natsUrl });
    const second = await buildGateway({
      nc,
      log: createLogger('gw2', 'silent'),
      config: {
        BODY_LIMIT_BYTES: 1 << 20,
        REQUEST_TIMEOUT_MS: 5000,
        READY_TIMEOUT_MS: 500,
        security: { rateLimitMax: 4, rateLimitRedis: r2 },
      },
    });
    await second.listen({ host: '127.0.0.1', port: 0 });
    const addr = second.server.address();
    const h1 = api(stack.baseUrl);
    const h2 = api(`http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`);
    try {
      expect((await h1.get('/api/agents')).status).toBe(200);
      expect((await h2.get('/api/agents')).status).toBe(200);
      expect((await h1.get('/api/agents')).status).toBe(200);
      expect((await h2.get('/api/agents')).status).toBe(200);
      expect((await h1.get('/api/agents')).status).toBe(429);
      expect((await h2.get('/api/agents')).status).toBe(429);
    } finally {
      await second.close();
      await nc.close();
      await stack.close();
      await r1.quit();
      await r2.quit();
      await redisServer.dispose();
    }
  });
});
