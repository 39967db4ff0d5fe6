import type { CaseResult } from '@vab/contracts';
import { Redis } from '@vab/storage';
import { startLocalRedis } from '@vab/testkit';
import { keys } from '../redis-keys.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestingStore } from './store.js';

let server: Awaited<ReturnType<typeof startLocalRedis>>;
let redis: Redis;
let store: TestingStore;

beforeAll(async () => {
  server = await startLocalRedis();
  redis = new Redis(server.url);
  store = new TestingStore(redis, { maxCases: 10, maxRuns: 1 });
});
afterAll(async () => {
  redis?.disconnect();
  await server?.dispose();
});

const result = (caseId: string, verdict: CaseResult['verdict']): CaseResult => ({
  caseId,
  name: caseId,
  verdict,
  attempts: 1,
  failures: [],
  observed: null,
  error: null,
  passRate: null,
  minPassRate: 1,
  repeats: [],
});

async function newRun(runId: string) {
  const meta = {
    id: runId,
    agentId: 'a1',
    version: 1,
    caseIds: ['c1'],
    createdAt: Date.now(),
    finishedAt: null,
  };
  return store.createRun(meta, [result('c1', 'queued')], Date.now() + 60_000);
}

describe('test run records', () => {
  it('stays finished when its old driver writes a result while a sweep finishes it', async () => {
    await newRun('r1');
    await store.setCaseResult('a1', 'r1', { ...result('c1', 'errored'), error: 'driver gone' });
    // another instance's sweep finishes the run while the driver, alive after all, reports late
    await Promise.all([store.finishRun('a1', 'r1'), store.setCaseResult('a1', 'r1', result('c1', 'passed'))]);
    const run = await store.getRun('a1', 'r1');
    expect(run.finishedAt).not.toBeNull();
    expect(run.status).toBe('passed');
  });

  it('does not bring back a run the per-agent cap removed', async () => {
    await newRun('r2'); // maxRuns 1: r1 goes
    await store.setCaseResult('a1', 'r1', result('c1', 'passed'));
    await expect(store.getRun('a1', 'r1')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await redis.exists(keys.run('a1', 'r1'))).toBe(0);
  });
});
