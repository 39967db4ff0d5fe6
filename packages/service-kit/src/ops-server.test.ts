import { connectNats } from '@vab/bus';
import { createRedis } from '@vab/storage';
import { startLocalRedis, startNats, type DisposableServer } from '@vab/testkit';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsCheck, redisCheck, startOpsServer } from './index.js';

const log = pino({ level: 'silent' });

describe('a service’s /healthz, /readyz and /metrics', () => {
  let nats: DisposableServer;
  beforeAll(async () => {
    nats = await startNats();
  });
  afterAll(async () => {
    await nats.dispose();
  });

  it('is not opened without METRICS_PORT', async () => {
    const ops = await startOpsServer({
      config: { METRICS_PORT: undefined, METRICS_HOST: '127.0.0.1' },
      registry: new Registry(),
      checks: {},
      log,
    });
    expect(ops).toBeUndefined();
  });

  it('says ready while NATS and Redis answer, and 503 naming Redis once Redis is gone', async () => {
    // a local redis-server: the test stops it under the service
    const redisServer = await startLocalRedis();
    const nc = await connectNats({ url: nats.url, name: 'ops-test', service: 'agents' }, log);
    const redis = createRedis(redisServer.url, log, { name: 'ops-test' });
    const registry = new Registry();
    const ops = await startOpsServer({
      config: { METRICS_PORT: 0, METRICS_HOST: '127.0.0.1' },
      registry,
      checks: { nats: natsCheck(nc), redis: redisCheck(redis) },
      log,
    });
    try {
      const base = `http://127.0.0.1:${ops!.port}`;
      await redis.ping();
      const health = await fetch(`${base}/healthz`);
      expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
      const ready = await fetch(`${base}/readyz`);
      expect([ready.status, await ready.json()]).toEqual([
        200,
        { status: 'ready', checks: { nats: 'up', redis: 'up' } },
      ]);
      const metrics = await fetch(`${base}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get('content-type')).toContain('text/plain');
      const scraped = await metrics.text();
      expect(scraped).toContain('dependency_up{dependency="nats"} 1');
      expect(scraped).toContain('dependency_up{dependency="redis"} 1');

      await redisServer.dispose();
      const started = Date.now();
      const down = await fetch(`${base}/readyz`);
      expect([down.status, await down.json()]).toEqual([
        503,
        { status: 'not ready', checks: { nats: 'up', redis: 'down' } },
      ]);
      // bounded: a dependency that does not answer is down within the check's timeout
      expect(Date.now() - started).toBeLessThan(3000);
      expect(await (await fetch(`${base}/metrics`)).text()).toContain('dependency_up{dependency="redis"} 0');
      // the process itself is still alive
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/nope`)).status).toBe(404);
    } finally {
      await ops?.close();
      redis.disconnect();
      await nc.drain();
    }
  });

  it('says NATS is down once its connection is closed', async () => {
    const nc = await connectNats({ url: nats.url, name: 'ops-test-2', service: 'agents' }, log);
    const ops = await startOpsServer({
      config: { METRICS_PORT: 0, METRICS_HOST: '127.0.0.1' },
      registry: new Registry(),
      checks: { nats: natsCheck(nc) },
      log,
    });
    try {
      await nc.close();
      const res = await fetch(`http://127.0.0.1:${ops!.port}/readyz`);
      expect([res.status, await res.json()]).toEqual([
        503,
        { status: 'not ready', checks: { nats: 'down' } },
      ]);
    } finally {
      await ops?.close();
    }
  });
});
