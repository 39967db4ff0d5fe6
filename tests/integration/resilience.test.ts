import { freePort, fullFlow, startLocalNats, startLocalRedis, withNode } from '@vab/testkit';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clinicScript, startOpenAiStub } from '../../services/playground/test/openai-stub.js';
import { requireBuilt, spawnService, type ServiceProcess } from '../helpers/processes.js';

/**
 * Issue 50: sessions through overload and faults, on real processes (each instance measures its own load, so
 * each runs alone, as in production).
 */

const HOG = join(import.meta.dirname, '..', 'helpers', 'event-loop-hog.mjs');
const cleanup: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

let env: Record<string, string>;
let base: string;
let agentId: string;

async function start(svc: string, extra: Record<string, string> = {}): Promise<ServiceProcess> {
  const p = spawnService(svc, { ...env, ...extra });
  cleanup.push(async () => {
    p.child.kill('SIGKILL');
    await p.exited;
  });
  await p.waitFor(svc === 'gateway' ? 'gateway listening' : '"msg":"serving"', 30_000);
  return p;
}

const playgroundEnv = (extra: Record<string, string> = {}) => ({
  FLOW_EGRESS_ALLOW: '127.0.0.1',
  ENV_FILE: '/nonexistent/.env',
  MAX_SESSIONS_PER_CALLER: '0',
  LOAD_CHECK_INTERVAL_MS: '250',
  ...extra,
});

async function post(path: string, body: unknown) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

const startText = () => post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: 'key-123456' } });

/** The instance whose log says it started the session. */
const hostOf = (sessionId: string, instances: ServiceProcess[]) =>
  instances.findIndex((p) =>
    p
      .output()
      .split('\n')
      .some((l) => l.includes('"session started"') && l.includes(sessionId)),
  );

beforeAll(async () => {
  requireBuilt();
  const nats = await startLocalNats();
  const redis = await startLocalRedis();
  const stub = await startOpenAiStub(clinicScript);
  cleanup.push(
    () => nats.dispose(),
    () => redis.dispose(),
    () => stub.close(),
  );
  env = { NATS_URL: nats.url, REDIS_URL: redis.url, SHUTDOWN_TIMEOUT_MS: '5000', LOG_LEVEL: 'info' };
  await start('agents');
  await start('sessions');
  const port = await freePort();
  await start('gateway', { PORT: String(port) });
  base = `http://127.0.0.1:${port}`;
  const flow = withNode(withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }), 'hook', {
    url: 'http://127.0.0.1:9/x',
  });
  agentId = (await post('/api/agents', { name: 'Resilient', flow })).body.id as string;
}, 120_000);

describe('load-based admission (issue 50)', () => {
  it('an overloaded instance refuses new sessions (503 + Retry-After), another takes them, and it rejoins once recovered', async () => {
    const loaded = await start(
      'playground',
      playgroundEnv({ NODE_OPTIONS: `--import ${HOG}`, LOAD_RECOVER_MS: '1000' }),
    );
    // its event loop busy 150 ms of every 200 ms: p99 ~150 ms, past the 100 ms default
    loaded.child.kill('SIGUSR2');
    await loaded.waitFor('"code":"INSTANCE_OVERLOADED"', 15_000);
    console.log('[overload] overloaded');
    // alone, it takes nothing: the start answers 503 with Retry-After, and no session is stored
    const refused = await startText();
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.body.code).toBe('CAPACITY_EXHAUSTED');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);

    const quiet = await start('playground', playgroundEnv({ LOAD_RECOVER_MS: '500' }));
    const instances = [loaded, quiet];
    const hosts: number[] = [];
    for (let i = 0; i < 6; i++) {
      // the quiet one's own start-up may count as load for a moment: a refused start is retried, as clients do
      let started = await startText();
      for (let tries = 0; started.status === 503 && tries < 20; tries++) {
        await new Promise((r) => setTimeout(r, 500));
        started = await startText();
      }
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      hosts.push(hostOf(started.body.sessionId as string, instances));
    }
    console.log('[overload] hosts', hosts);
    expect(hosts).toEqual([1, 1, 1, 1, 1, 1]);

    // the load gone, it rejoins the queue group: it takes its share again
    loaded.child.kill('SIGUSR2');
    await loaded.waitFor('"msg":"load recovered: taking new sessions again"', 30_000);
    await expect
      .poll(
        async () => {
          const started = await startText();
          expect(started.status).toBe(201);
          return hostOf(started.body.sessionId as string, instances);
        },
        { timeout: 20_000, interval: 50 },
      )
      .toBe(0);
  }, 120_000);
});
