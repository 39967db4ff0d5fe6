import { freePort, fullFlow, startLocalNats, startLocalRedis, withNode } from '@vab/testkit';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  clinicScript,
  lastUserText,
  startOpenAiStub,
  type ChatRequest,
} from '../../../services/playground/test/openai-stub.js';
import { cleanupAfterAll, requireBuilt, startService } from '../../helpers/processes.js';

const cleanup = cleanupAfterAll();

const SWEEP_MS = 300;

describe('sessions whose playground is gone (issue 35 #10)', () => {
  beforeAll(requireBuilt);
  it('a killed playground leaves no session open: the owner sweep closes it within a bound', async () => {
    const nats = await startLocalNats();
    const redis = await startLocalRedis();
    // a test case's turn that says "slowly" is answered late: its attempt is under way when the kill comes
    const stub = await startOpenAiStub((req: ChatRequest) =>
      lastUserText(req).includes('slowly') && !req.tools?.length
        ? { ...clinicScript(req), delayMs: 20_000 }
        : clinicScript(req),
    );
    cleanup.push(
      () => nats.dispose(),
      () => redis.dispose(),
      () => stub.close(),
    );
    const env = { NATS_URL: nats.url, REDIS_URL: redis.url, SHUTDOWN_TIMEOUT_MS: '5000', LOG_LEVEL: 'info' };
    const start = (svc: string, extra: Record<string, string> = {}) =>
      startService(svc, { ...env, ...extra }, cleanup, { timeoutMs: 20_000 });
    await start('agents');
    await start('sessions', { OWNER_SWEEP_INTERVAL_MS: String(SWEEP_MS), OWNER_SWEEP_GRACE_MS: '500' });
    const playground = await start('playground', {
      FLOW_EGRESS_ALLOW: '127.0.0.1',
      ENV_FILE: '/nonexistent/.env',
      METRICS_PORT: '0',
    });
    const port = await freePort();
    await start('gateway', { PORT: String(port) });
    const base = `http://127.0.0.1:${port}`;
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const get = async (path: string) =>
      (await fetch(`${base}${path}`)).json() as Promise<Record<string, unknown>>;

    const flow = withNode(withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }), 'hook', {
      url: 'http://127.0.0.1:9/x',
    });
    const agentId = (await post('/api/agents', { name: 'Orphan', flow })).body.id as string;
    const started = await post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: 'key-123456' } });
    expect(started.status).toBe(201);
    const sessionId = started.body.sessionId as string;
    await post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text: 'Hi' });

    // and a test run whose attempt is under way on the same instance
    await post(`/api/agents/${agentId}/test-cases`, {
      name: 'slow',
      turns: ['Hi', 'slowly please'],
      expect: {},
    });
    const run = await post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: 'key-123456' } });
    expect(run.status).toBe(202);
    const testSessions = async () =>
      (
        (await get(`/api/agents/${agentId}/test-sessions`)) as unknown as {
          id: string;
          sessionType: string;
          status: string;
        }[]
      ).filter((t) => t.sessionType === 'test');
    await expect.poll(async () => (await testSessions()).length, { timeout: 10_000 }).toBeGreaterThan(0);

    // a live owner keeps its session open across several sweeps
    await new Promise((r) => setTimeout(r, 4 * SWEEP_MS + 500));
    expect(await get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).toMatchObject({ status: 'open' });

    expect((await testSessions()).map((t) => t.status)).toContain('open');
    const killedAt = Date.now();
    playground.child.kill('SIGKILL');
    await playground.exited;
    await expect
      .poll(async () => (await get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).status, {
        timeout: 10_000,
        interval: 100,
      })
      .toBe('closed');
    const closedAfterMs = Date.now() - killedAt;
    await expect
      .poll(async () => (await testSessions()).map((t) => t.status), { timeout: 10_000, interval: 100 })
      .not.toContain('open');
    const record = await get(`/api/agents/${agentId}/test-sessions/${sessionId}`);
    expect(record.endedAt).toEqual(expect.any(Number));
    expect(record.endedAt as number).toBeGreaterThanOrEqual(killedAt - 100);
    expect(record.durationMs).toBe((record.endedAt as number) - (record.startedAt as number));
    // it says why: its instance was lost (a session its instance closed has none)
    expect(record.endedReason).toBe('instance_lost');
    // two sweeps to be sure, plus one of slack
    expect(closedAfterMs).toBeLessThan(4 * SWEEP_MS + 1000);
    console.log(
      `[kill -9 playground] session closed ${closedAfterMs} ms after the kill (sweep every ${SWEEP_MS} ms)`,
    );
    // four process starts: a playground alone took over 10 s to start at load average 30
  }, 120_000);
});
