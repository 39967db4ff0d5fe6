import { freePort, startLocalNats, startLocalRedis } from '@vab/testkit';
import { Redis } from 'ioredis';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireBuilt, startService, type ServiceProcess } from '../../helpers/processes.js';

const REQUEST_TIMEOUT_MS = 2000;

interface Load {
  /** Agents created so far, and how many answers had `status`. */
  acknowledged(): number;
  answered(status: string): number;
  stop(): Promise<{
    sent: number;
    byStatus: Record<string, number>;
    acknowledged: string[];
    slowestMs: number;
  }>;
}

/** `workers` loops creating agents through the gateway until stopped; records every answer. */
function createLoad(base: string, workers = 8): Load {
  let running = true;
  const byStatus: Record<string, number> = {};
  const acknowledged: string[] = [];
  let sent = 0;
  let slowestMs = 0;
  const loops = Array.from({ length: workers }, async (_, w) => {
    for (let i = 0; running; i++) {
      const t0 = Date.now();
      sent++;
      let status = 'network error';
      try {
        const res = await fetch(`${base}/api/agents`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            name: `load ${w}-${i}`,
            flow: { nodes: [{ id: 'a', nodeType: 'agent' }], edges: [] },
          }),
        });
        status = String(res.status);
        const body = (await res.json()) as { id?: string };
        if (res.status === 201 && body.id) acknowledged.push(body.id);
      } catch {
        // a back-off, not a wait: a refused connection would otherwise spin this loop
        await new Promise((r) => setTimeout(r, 20));
      }
      slowestMs = Math.max(slowestMs, Date.now() - t0);
      byStatus[status] = (byStatus[status] ?? 0) + 1;
    }
  });
  return {
    acknowledged: () => acknowledged.length,
    answered: (status) => byStatus[status] ?? 0,
    async stop() {
      running = false;
      await Promise.all(loops);
      return { sent, byStatus, acknowledged, slowestMs };
    },
  };
}

/** Every acknowledged agent is whole: readable, with its snapshot and content, and in the list. */
async function lostWrites(base: string, redisUrl: string, ids: string[]): Promise<number> {
  const redis = new Redis(redisUrl);
  let lost = 0;
  try {
    for (const id of ids) {
      const res = await fetch(`${base}/api/agents/${id}`);
      const [version, head] = await redis.hmget(`ag:{${id}}`, 'version', 'head');
      const whole =
        res.status === 200 && Number(version) >= 1 && (await redis.exists(`ag:{${id}}:c:${head}`)) === 1;
      if (!whole) lost++;
    }
    // and no half-written agent exists at all: every agent hash has its version entries and content
    for (const key of (await redis.keys('ag:{*}')).filter((k) => /^ag:\{[^}]+\}$/.test(k))) {
      const [version, head] = await redis.hmget(key, 'version', 'head');
      expect(await redis.zcard(`${key}:v`)).toBe(Number(version));
      expect(await redis.exists(`${key}:c:${head}`)).toBe(1);
    }
  } finally {
    await redis.quit();
  }
  return lost;
}

/** How long until the API lists agents again. */
const recovery = async (base: string): Promise<number> => {
  const t0 = Date.now();
  await vi.waitFor(
    async () => {
      expect((await fetch(`${base}/api/agents`)).status).toBe(200);
    },
    { timeout: 10_000, interval: 25 },
  );
  return Date.now() - t0;
};

/** Waits until the load has created `more` agents beyond what it had (it is running, and writes land). */
const progressed = async (load: Load, more = 20) => {
  const from = load.acknowledged();
  await expect.poll(() => load.acknowledged(), { timeout: 10_000 }).toBeGreaterThanOrEqual(from + more);
};

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
  cleanup = [];
});

async function stackOfProcesses(opts: { agentsInstances: number; appendOnly?: boolean }) {
  const nats = await startLocalNats();
  const redis = await startLocalRedis({ appendOnly: opts.appendOnly ?? true });
  cleanup.push(
    () => nats.dispose(),
    () => redis.dispose(),
  );
  const env = { NATS_URL: nats.url, REDIS_URL: redis.url, LOG_LEVEL: 'warn', SHUTDOWN_TIMEOUT_MS: '5000' };
  const procs: ServiceProcess[] = [];
  const start = async (svc: string, extra: Record<string, string> = {}) => {
    const p = await startService(svc, { ...env, ...extra, LOG_LEVEL: 'info' }, cleanup);
    procs.push(p);
    return p;
  };
  const agents: ServiceProcess[] = [];
  for (let i = 0; i < opts.agentsInstances; i++) agents.push(await start('agents'));
  await start('sessions');
  const port = await freePort();
  // a load test from one address: the rate limit is not what is under test here
  await start('gateway', {
    PORT: String(port),
    REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    RATE_LIMIT_MAX: '100000000',
  });
  return { base: `http://127.0.0.1:${port}`, redis, nats, agents, start };
}

describe('faults under load, with real processes', () => {
  beforeAll(requireBuilt);
  it('the only agents process killed mid-load: quick 503s, none past the timeout, recovery on restart, no write lost', async () => {
    const s = await stackOfProcesses({ agentsInstances: 1 });
    const load = createLoad(s.base);
    await progressed(load);
    s.agents[0]!.child.kill('SIGKILL');
    await s.agents[0]!.exited;
    // with no instance left, new requests answer 503 at once, never after the gateway's timeout (the ones the
    // killed process held time out). "Left" as NATS knows it: the kernel closes a killed process's socket at
    // once, but a busy nats-server reads that a moment later, and until then a request may still go to it (504)
    await expect
      .poll(async () => (await fetch(`${s.base}/api/agents`)).status, { timeout: 10_000, interval: 50 })
      .toBe(503);
    const t0 = Date.now();
    const down = await fetch(`${s.base}/api/agents`);
    expect(down.status).toBe(503);
    expect(Date.now() - t0).toBeLessThan(REQUEST_TIMEOUT_MS / 2);
    // the wait is the test: past the gateway's timeout, the requests the killed process held answer 504
    await new Promise((r) => setTimeout(r, REQUEST_TIMEOUT_MS + 500));
    const restarted = Date.now();
    await s.start('agents');
    const recoveryMs = await recovery(s.base);
    await progressed(load);
    const result = await load.stop();
    const lost = await lostWrites(s.base, s.redis.url, result.acknowledged);
    console.log(
      `[kill -9 agents] sent ${result.sent}, by status ${JSON.stringify(result.byStatus)}, slowest ${result.slowestMs} ms, serving again ${recoveryMs} ms after the restart began (${Date.now() - restarted} ms total), writes lost ${lost}`,
    );
    // 503 while no instance serves; 504 only for the few requests the killed process had taken
    expect(Object.keys(result.byStatus).every((st) => st === '201' || st === '503' || st === '504')).toBe(
      true,
    );
    expect(result.byStatus['503']).toBeGreaterThan(0);
    expect(result.byStatus['504'] ?? 0).toBeLessThanOrEqual(8); // at most one in flight per load worker
    expect(result.slowestMs).toBeLessThan(REQUEST_TIMEOUT_MS + 1000);
    expect(lost).toBe(0);
  }, 60_000);

  it('a rolling restart of two agents instances under load loses no acknowledged write and fails no request', async () => {
    const s = await stackOfProcesses({ agentsInstances: 2 });
    const load = createLoad(s.base);
    for (const old of [...s.agents]) {
      await progressed(load);
      old.child.kill('SIGTERM');
      expect(await old.exited).toBe(0);
      await s.start('agents');
    }
    await progressed(load);
    const result = await load.stop();
    const lost = await lostWrites(s.base, s.redis.url, result.acknowledged);
    console.log(
      `[rolling restart] sent ${result.sent}, by status ${JSON.stringify(result.byStatus)}, slowest ${result.slowestMs} ms, writes lost ${lost}`,
    );
    expect(result.byStatus).toEqual({ '201': result.sent });
    expect(lost).toBe(0);
  }, 60_000);

  it('Redis restarted under load (append-only): 503s while it is down, then recovery, nothing acknowledged lost', async () => {
    const s = await stackOfProcesses({ agentsInstances: 1, appendOnly: true });
    const load = createLoad(s.base);
    await progressed(load);
    await s.redis.stop();
    // down long enough that the load meets it: 503s, at once
    await expect.poll(() => load.answered('503'), { timeout: 10_000 }).toBeGreaterThanOrEqual(8);
    const restarted = Date.now();
    await s.redis.start();
    const recoveryMs = await recovery(s.base);
    await progressed(load);
    const result = await load.stop();
    const lost = await lostWrites(s.base, s.redis.url, result.acknowledged);
    console.log(
      `[redis restart] sent ${result.sent}, by status ${JSON.stringify(result.byStatus)}, slowest ${result.slowestMs} ms, serving again ${recoveryMs} ms after redis restarted (${Date.now() - restarted} ms total), writes lost ${lost}`,
    );
    expect(Object.keys(result.byStatus).every((st) => st === '201' || st === '503')).toBe(true);
    expect(result.slowestMs).toBeLessThan(REQUEST_TIMEOUT_MS + 1000);
    expect(lost).toBe(0);
  }, 60_000);
});
