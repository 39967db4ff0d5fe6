import { createAccessLog, createLogger } from '@vab/service-kit';
import { describe, expect, it } from 'vitest';
import { loadConfig, securityOf } from './config.js';
import { createEdge } from './edge.js';

/** The edge with two routes, as the gateway serves the talk page and an API path. */
async function edge() {
  const app = await createEdge({
    log: createLogger('gateway-test', 'silent'),
    accessLog: createAccessLog('gateway-test', 'silent'),
    bodyLimitBytes: 1024 * 1024,
    security: securityOf(loadConfig({})),
  });
  app.get('/live/:subdomain', async () => ({ page: true }));
  app.post('/api/things', async () => ({ ok: true }));
  await app.ready();
  return app;
}

describe('a request no route takes', () => {
  it('answers 405 with Allow when only its method is not served', async () => {
    const app = await edge();
    const res = await app.inject({ method: 'PUT', url: '/live/shop' });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    await app.close();
  });

  it('answers 404, not a 405 naming its own method as allowed, for a served path with a trailing slash', async () => {
    const app = await edge();
    for (const [method, url] of [
      ['GET', '/live/shop/'],
      ['POST', '/api/things/'],
    ] as const) {
      const res = await app.inject({ method, url });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json().code).toBe('ROUTE_NOT_FOUND');
    }
    // another method on it still says which ones the path is served with
    expect((await app.inject({ method: 'DELETE', url: '/live/shop/' })).statusCode).toBe(405);
    await app.close();
  });
});
