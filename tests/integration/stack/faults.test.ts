import { connect } from '@nats-io/transport-node';
import { startLocalNats, startLocalRedis } from '@vab/testkit';
import { describe, expect, it, vi } from 'vitest';
import { api, sampleFlow, startStack } from '../../helpers/stack.js';

describe('when a service is down', () => {
  it('answers 503 quickly while no instance serves the subject, and recovers when one returns', async () => {
    const stack = await startStack();
    const http = api(stack.baseUrl);
    try {
      const created = await http.post('/api/agents', { name: 'Survivor' });
      await stack.services.agents.stop();
      const t0 = Date.now();
      const res = await http.get(`/api/agents/${created.body.id}`);
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({
        code: 'SERVICE_UNAVAILABLE',
        message: 'the agents service is not available',
      });
      expect(res.headers.get('retry-after')).toBe('1');
      expect(Date.now() - t0).toBeLessThan(1000);
      const ready = await http.get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.services).toMatchObject({ agents: 'SERVICE_UNAVAILABLE', sessions: 'up' });
      // the sessions service depends on agents for existence checks: it reports 503 too, not 500
      expect(
        (await http.post(`/api/agents/${created.body.id}/test-sessions`, { sessionType: 'text' })).status,
      ).toBe(503);

      await stack.services.agents.start();
      expect((await http.get(`/api/agents/${created.body.id}`)).status).toBe(200);
      expect((await http.get('/readyz')).status).toBe(200);
    } finally {
      await stack.close();
    }
  });

  it('answers 504 when a service takes longer than the route timeout', async () => {
    const stack = await startStack({ requestTimeoutMs: 300 });
    const http = api(stack.baseUrl);
    const nc = await connect({ servers: stack.natsUrl });
    try {
      await stack.services.agents.stop();
      // a wedged instance: takes the request and never answers
      nc.subscribe('agents.list', { queue: 'agents', callback: () => undefined });
      await nc.flush();
      const t0 = Date.now();
      const res = await http.get('/api/agents');
      const elapsed = Date.now() - t0;
      expect(res.status).toBe(504);
      expect(res.body.code).toBe('TIMEOUT');
      expect(elapsed).toBeGreaterThanOrEqual(280);
      expect(elapsed).toBeLessThan(2000);
    } finally {
      await nc.close();
      await stack.close();
    }
  });
});

describe('when Redis restarts', () => {
  it('the services recover without a restart of their own and nothing acknowledged is lost', async () => {
    const redis = await startLocalRedis({ appendOnly: true });
    const stack = await startStack({ redisUrl: redis.url });
    const http = api(stack.baseUrl);
    try {
      const created = await http.post('/api/agents', { name: 'Durable', flow: sampleFlow() });
      expect(created.status).toBe(201);
      await redis.stop();
      const during = await http.get(`/api/agents/${created.body.id}`);
      expect(during.status).toBe(503);
      expect(during.body.code).toBe('SERVICE_UNAVAILABLE');
      await redis.start();
      const after = await eventually(
        () => http.get(`/api/agents/${created.body.id}`),
        (r) => r.status === 200,
        5000,
      );
      expect(after.status).toBe(200);
      expect(after.body).toEqual(created.body);
      expect((await http.patch(`/api/agents/${created.body.id}`, { name: 'Still here' })).status).toBe(200);
    } finally {
      await stack.close();
      await redis.dispose();
    }
  });
});

describe('payloads above the bus limit', () => {
  it('answers 413 before sending a body the bus cannot carry, storing nothing', async () => {
    const nats = await startLocalNats({ maxPayload: 256 * 1024 });
    const stack = await startStack({ natsUrl: nats.url, bodyLimitBytes: 4 * 1024 * 1024 });
    const http = api(stack.baseUrl);
    try {
      const before = (await http.get('/api/agents')).body.length;
      const flow = {
        nodes: [{ id: 'a', nodeType: 'agent', instructions: 'x'.repeat(300 * 1024) }],
        edges: [],
      };
      const res = await http.post('/api/agents', { name: 'Too big for the bus', flow });
      expect(res.status).toBe(413);
      expect(res.body.code).toBe('PAYLOAD_TOO_LARGE');
      expect((await http.get('/api/agents')).body.length).toBe(before);
      // under the limit still works
      const ok = await http.post('/api/agents', {
        name: 'fits',
        flow: { nodes: [{ id: 'a', nodeType: 'agent', instructions: 'x'.repeat(100 * 1024) }], edges: [] },
      });
      expect(ok.status).toBe(201);
    } finally {
      await stack.close();
      await nats.dispose();
    }
  });
});

describe('when NATS restarts', () => {
  it('every process reconnects by itself and requests succeed again', async () => {
    const nats = await startLocalNats();
    const stack = await startStack({ natsUrl: nats.url });
    const http = api(stack.baseUrl);
    try {
      const created = await http.post('/api/agents', { name: 'Across a NATS restart' });
      expect(created.status).toBe(201);
      await nats.stop();
      // once the gateway has seen the disconnect, requests fail fast with 503 (no waiting for a timeout)
      await eventually(
        () => http.get('/readyz'),
        (r) => r.status === 503,
      );
      const t0 = Date.now();
      const during = await http.get(`/api/agents/${created.body.id}`);
      expect(during.status).toBe(503);
      expect(Date.now() - t0).toBeLessThan(1000);
      await nats.start();
      // every process reconnects by itself: the gateway, agents and sessions all answer again
      const after = await eventually(
        () => http.get(`/api/agents/${created.body.id}`),
        (r) => r.status === 200,
      );
      expect(after.body.name).toBe('Across a NATS restart');
      const session = await eventually(
        () => http.post(`/api/agents/${created.body.id}/test-sessions`, { sessionType: 'text' }),
        (r) => r.status === 201,
      );
      expect(session.body.sessionType).toBe('text');
      // the playground reconnects on its own schedule (backoff with jitter), not necessarily before these two
      const ready = await eventually(
        () => http.get('/readyz'),
        (r) => r.status === 200,
      );
      expect(ready.body).toMatchObject({ status: 'ready', bus: 'connected' });
    } finally {
      await stack.close();
      await nats.dispose();
    }
  });
});

/** Repeats `call` until `ok` holds (bounded), returning the last answer: the caller asserts on it. */
async function eventually<T>(call: () => Promise<T>, ok: (r: T) => boolean, timeoutMs = 10_000): Promise<T> {
  let last: T | undefined;
  await vi
    .waitFor(
      async () => {
        last = await call();
        if (!ok(last)) throw new Error('not yet');
      },
      { timeout: timeoutMs, interval: 50 },
    )
    .catch(() => undefined);
  return last as T;
}
