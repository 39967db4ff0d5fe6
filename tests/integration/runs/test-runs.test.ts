import { processMetrics } from '@vab/service-kit';
import { fullFlow, withNode } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  clinicScript,
  lastUserText,
  startOpenAiStub,
  type ChatRequest,
} from '../../../services/playground/test/openai-stub.js';
import { finishedRun } from '../../helpers/runs.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

const KEY = 'sk-test-0123456789abcdef';

/** test_runs_total and test_cases_total by verdict, as this process's registry has them now. */
async function verdictCounts(): Promise<Record<string, number>> {
  const text = await processMetrics().registry.metrics();
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^test_(runs|cases)_total\{verdict="(\w+)"\} (\d+)$/gm)) {
    counts[`${m[1]}/${m[2]}`] = Number(m[3]);
  }
  return counts;
}

const diff = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(
    Object.entries(b)
      .map(([k, v]) => [k, v - (a[k] ?? 0)] as const)
      .filter(([, d]) => d !== 0),
  );
const BOOKING = ['Hi', 'Ada', '1815', 'I want to book, yes please'];
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
let stack: Stack;
let http: ReturnType<typeof api>;
/** Turns with this word are answered slowly, once: long enough to kill the instance that runs them. */
let slowOnce = true;

// a reply's request carries an empty tool list; a decision's carries its tool
function script(req: ChatRequest) {
  if (lastUserText(req).includes('slowly') && slowOnce && !req.tools?.length) {
    slowOnce = false;
    return { ...clinicScript(req), delayMs: 4000 };
  }
  return clinicScript(req);
}

const flowFor = () =>
  withNode(withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }), 'hook', {
    url: 'http://127.0.0.1:9/unreachable',
  });

beforeAll(async () => {
  stub = await startOpenAiStub(script);
  stack = await startStack({ testRuns: { caseTimeoutMs: 2500, attempts: 2, heartbeatMs: 300 } });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack?.close();
  await stub?.close();
});

async function agent(name: string) {
  const res = await http.post('/api/agents', { name, flow: flowFor() });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const finished = (agentId: string, runId: string) => finishedRun(http, agentId, runId);

async function runAll(agentId: string, body: object = {}) {
  const started = await http.post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: KEY }, ...body });
  expect(started.status).toBe(202);
  expect(['queued', 'running']).toContain(started.body.status);
  return finished(agentId, started.body.id);
}

const passing = {
  name: 'books an appointment',
  turns: BOOKING,
  expect: {
    steps: ['start', 'burst', 'cat', 'end'],
    ends: true,
    endsAt: 'end',
    replyContains: ['goodbye', 'ok: Hi'],
    structured: { name: 'Ada' },
  },
  temperature: 0,
};
const failing = {
  name: 'asks for a refund',
  turns: BOOKING,
  expect: { steps: ['start', 'transfer'], replyContains: ['refund'], structured: { name: 'Bob' } },
};

describe('test cases and runs', () => {
  it('runs passing and failing cases, and says what differed', async () => {
    const agentId = await agent('Clinic');
    const a = await http.post(`/api/agents/${agentId}/test-cases`, passing);
    const b = await http.post(`/api/agents/${agentId}/test-cases`, failing);
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(
      (await http.get(`/api/agents/${agentId}/test-cases`)).body.map((c: { id: string }) => c.id),
    ).toEqual([a.body.id, b.body.id]);

    const before = await verdictCounts();
    const run = await runAll(agentId);
    // an errored case says why (a clean-clone CI run once found both errored, under load, and no more)
    expect(run, JSON.stringify(run.cases.map((c: { error: string | null }) => c.error))).toMatchObject({
      status: 'failed',
      version: 1,
      counts: { total: 2, passed: 1, failed: 1 },
    });
    // what Prometheus scrapes of the sessions service: one failed run, one passed and one failed case
    await expect
      .poll(async () => diff(before, await verdictCounts()))
      .toEqual({ 'runs/failed': 1, 'cases/passed': 1, 'cases/failed': 1 });
    const [ok, bad] = run.cases;
    expect(ok).toMatchObject({ caseId: a.body.id, verdict: 'passed', failures: [] });
    // a case whose attempt errored (a model call past its timeout on a busy machine) is tried again, up to the
    // stack's 2 attempts: a clean-clone run under load passed this one at its second
    expect([1, 2]).toContain(ok.attempts);
    expect(ok.observed).toMatchObject({
      ended: true,
      endedAt: 'end',
      structured: { name: 'Ada', urgent: true },
    });
    expect(ok.observed.steps).toEqual(['start', 'burst', 'talk', 'cat', 'ifelse', 'end']);
    expect(bad.verdict).toBe('failed');
    expect(bad.failures.map((f: { expectation: string }) => f.expectation)).toEqual([
      'steps',
      'replyContains',
      'structured',
    ]);
    expect(bad.failures[0]).toMatchObject({
      expected: ['start', 'transfer'],
      actual: ['start', 'burst', 'talk', 'cat', 'ifelse', 'end'],
    });
    expect(bad.failures[2]).toMatchObject({
      expected: { name: 'Bob' },
      actual: { name: 'Ada', urgent: true },
    });

    // each case is a test session of type "test" with its transcript
    const session = await http.get(`/api/agents/${agentId}/test-sessions/${ok.observed.sessionId}`);
    expect(session.body).toMatchObject({ sessionType: 'test' });
    const messages = await http.get(`/api/agents/${agentId}/test-sessions/${ok.observed.sessionId}/messages`);
    expect(messages.body.filter((m: { role: string }) => m.role === 'user')).toHaveLength(4);
    // the run is listed, newest first; the temperature override reached the model
    expect((await http.get(`/api/agents/${agentId}/test-runs`)).body[0].id).toBe(run.id);
    expect(stub.requests.some((r) => r.temperature === 0)).toBe(true);
  });

  it('refuses bad cases and runs with clear errors', async () => {
    const agentId = await agent('Strict');
    expect(
      (await http.post(`/api/agents/${agentId}/test-cases`, { name: 'no turns', turns: [] })).status,
    ).toBe(400);
    expect((await http.post(`/api/agents/${agentId}/test-runs`, {})).status).toBe(400);
    const missing = await http.post(`/api/agents/${agentId}/test-runs`, {
      caseIds: ['00000000-0000-0000-0000-000000000000'],
    });
    expect(missing.status).toBe(404);
    const c = await http.post(`/api/agents/${agentId}/test-cases`, passing);
    expect((await http.post(`/api/agents/${agentId}/test-runs`, { version: 9 })).status).toBe(404);
    const edited = await http.patch(`/api/agents/${agentId}/test-cases/${c.body.id}`, { name: 'renamed' });
    expect(edited.body).toMatchObject({ name: 'renamed', turns: BOOKING });
    expect((await http.delete(`/api/agents/${agentId}/test-cases/${c.body.id}`)).body).toEqual({ ok: true });
    expect((await http.get(`/api/agents/${agentId}/test-cases/${c.body.id}`)).status).toBe(404);
  });

  it('replays a recorded session against a new version', async () => {
    const agentId = await agent('Recorded');
    const started = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: KEY } });
    const sessionId = started.body.sessionId as string;
    for (const text of BOOKING) {
      await http.post(`/api/agents/${agentId}/text-sessions/${sessionId}/turns`, { text });
    }
    await http.delete(`/api/agents/${agentId}/text-sessions/${sessionId}`);

    const replay = await http.post(`/api/agents/${agentId}/test-cases`, { fromSession: sessionId });
    expect(replay.status).toBe(201);
    expect(replay.body).toMatchObject({
      turns: BOOKING,
      fromSession: sessionId,
      expect: { steps: ['start', 'burst', 'talk', 'end'] },
    });
    // a new version whose last step has another id: the replay fails on it, and passes on the old one
    const old = flowFor();
    const rename = (id: string) => (id === 'end' ? 'bye' : id);
    const next = {
      ...old,
      nodes: old.nodes.map((n) => ({ ...n, id: rename(n.id) })),
      edges: old.edges.map((e) => ({ ...e, source: rename(e.source), target: rename(e.target) })),
    };
    await http.patch(`/api/agents/${agentId}`, { flow: next });
    const onNew = await runAll(agentId);
    expect(onNew).toMatchObject({ version: 2, status: 'failed' });
    expect(onNew.cases[0].failures[0].expectation).toBe('steps');
    expect(onNew.sinceLastPass).toBeNull();
    const onOld = await runAll(agentId, { version: 1 });
    expect(onOld.status).toBe('passed');
    // failing again on the new version: next to it, the last passing run and what changed since its version
    const again = await runAll(agentId);
    expect(again.status).toBe('failed');
    expect(again.sinceLastPass).toMatchObject({ runId: onOld.id, version: 1 });
    expect(again.sinceLastPass.changes.nodes).toMatchObject({ added: ['bye'], removed: ['end'] });
  });

  it('gates deploys on the last finished run of their version; an override is recorded', async () => {
    const agentId = await agent('Gated');
    const good = await http.post(`/api/agents/${agentId}/test-cases`, passing);
    const bad = await http.post(`/api/agents/${agentId}/test-cases`, failing);
    expect((await http.put(`/api/agents/${agentId}/deploy-gate`, { enabled: true })).body).toEqual({
      enabled: true,
    });
    expect((await http.get(`/api/agents/${agentId}/deploy-gate`)).body).toEqual({ enabled: true });
    const goLive = async (override?: object) => {
      const d = (await http.post(`/api/agents/${agentId}/deploys`, { external: true })).body;
      await http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'building' });
      return http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'live', ...override });
    };

    const untested = await goLive();
    expect(untested.status).toBe(409);
    expect(untested.body).toMatchObject({ code: 'TESTS_NOT_PASSED' });
    expect(untested.body.message).toContain('no finished test run on version 1');

    const failed = await runAll(agentId);
    const refused = await goLive();
    expect(refused.status).toBe(409);
    expect(refused.body.message).toContain(failed.id);

    const forced = await goLive({ override: { reason: 'hotfix for an outage' } });
    expect(forced.status).toBe(200);
    expect(forced.body).toMatchObject({ status: 'live', gateOverride: { reason: 'hotfix for an outage' } });

    // a run of the passing case alone does not vouch for the other one
    expect((await runAll(agentId, { caseIds: [good.body.id] })).status).toBe('passed');
    const partial = await goLive();
    expect(partial.status).toBe(409);
    expect(partial.body.message).toContain("did not run 1 of the agent's cases");
    // the builder drops the case that fails: that passing run now covers every case
    expect((await http.delete(`/api/agents/${agentId}/test-cases/${bad.body.id}`)).status).toBe(200);
    const allowed = await goLive();
    expect(allowed.status).toBe(200);
    expect(allowed.body.gateOverride).toBeUndefined();
  });

  it('starts a case again elsewhere when its playground instance dies', async () => {
    const agentId = await agent('Survivor');
    const spare = await stack.addPlayground();
    try {
      const c = await http.post(`/api/agents/${agentId}/test-cases`, {
        name: 'slow model',
        turns: ['Hi', 'please answer slowly'],
        expect: { replyContains: ['ok: please answer slowly'] },
      });
      slowOnce = true;
      const started = await http.post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: KEY } });
      // wait until an instance holds the case, then kill that instance
      const holder = await vi.waitFor(
        () => {
          const found = [stack.services.playground, spare].find(
            (p) => (p.playground?.sessions.count('test') ?? 0) > 0,
          );
          if (!found) throw new Error('no instance holds the case');
          return found;
        },
        { timeout: 5000, interval: 50 },
      );
      await holder.crash();
      const run = await finished(agentId, started.body.id);
      expect(run.status).toBe('passed');
      expect(run.cases[0]).toMatchObject({ caseId: c.body.id, verdict: 'passed', attempts: 2 });
      await holder!.start();
    } finally {
      await spare.stop();
    }
  });

  it('queues cases while every instance is full, without spending their attempts', async () => {
    const small = await startStack({
      playground: { MAX_SESSIONS: 1 },
      testRuns: { concurrency: 4, attempts: 1 },
    });
    try {
      const h = api(small.baseUrl);
      const agentId = (await h.post('/api/agents', { name: 'Busy', flow: flowFor() })).body.id as string;
      for (let i = 0; i < 4; i++)
        await h.post(`/api/agents/${agentId}/test-cases`, { ...passing, name: `case ${i}` });
      const started = await h.post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: KEY } });
      const run = await finishedRun(h, agentId, started.body.id, 30_000);
      expect(run, JSON.stringify(run.cases.map((c: { error: string | null }) => c.error))).toMatchObject({
        status: 'passed',
        counts: { total: 4, passed: 4 },
      });
      expect(run.cases.map((c: { attempts: number }) => c.attempts)).toEqual([1, 1, 1, 1]);
    } finally {
      await small.close();
    }
  });

  it('errors a case whose flow cannot run, saying what to fix', async () => {
    const res = await http.post('/api/agents', {
      name: 'Unrunnable',
      flow: { nodes: [{ id: 'sticky-note', position: { x: 0, y: 0 } }], edges: [] },
    });
    const agentId = res.body.id as string;
    await http.post(`/api/agents/${agentId}/test-cases`, { name: 'any', turns: ['Hi'] });
    const started = await http.post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: KEY } });
    const run = await finished(agentId, started.body.id);
    expect(run.status).toBe('errored');
    expect(run.cases[0].error).toMatch(/^FLOW_INVALID: the flow cannot run \(.*sticky-note/);
  });

  it('errors what is left of a run whose sessions instance died, instead of leaving it running', async () => {
    const agentId = await agent('Orphaned');
    await http.post(`/api/agents/${agentId}/test-cases`, { name: 'slow', turns: ['Hi', 'answer slowly'] });
    slowOnce = true;
    const started = await http.post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: KEY } });
    await stack.services.sessions.crash();
    await stack.services.sessions.start();
    const run = await finished(agentId, started.body.id);
    expect(run.status).toBe('errored');
    expect(run.cases[0].error).toContain('stopped before the case finished');
  });
});

describe('version diff', () => {
  it('reports renamed params and changed edges; moved nodes only when canvas changes are asked for', async () => {
    const agentId = await agent('Diffed');
    const v1 = flowFor();
    const burst = v1.nodes.find((n) => n.id === 'burst')!;
    const { command, ...rest } = burst;
    const v2 = {
      ...v1,
      nodes: [
        ...v1.nodes.map((n) =>
          n.id === 'burst'
            ? { ...rest, prompt: command }
            : n.id === 'talk'
              ? { ...n, position: { x: 5, y: 9 } }
              : n,
        ),
        { id: 'extra', nodeType: 'opentalk', command: 'Anything else?' },
      ].filter((n) => n.id !== 'timer'),
      edges: v1.edges.filter((e) => e.target !== 'timer'),
    };
    await http.patch(`/api/agents/${agentId}`, { flow: v2 });

    const diff = await http.get(`/api/agents/${agentId}/versions/1/diff/2`);
    expect(diff.status).toBe(200);
    expect(diff.body.nodes).toEqual({
      added: ['extra'],
      removed: ['timer'],
      changed: [
        {
          id: 'burst',
          fields: [
            { name: 'command', before: command },
            { name: 'prompt', after: command },
          ],
        },
      ],
    });
    expect(diff.body.edges.added).toEqual([]);
    expect(diff.body.edges.removed.map((e: { target: string }) => e.target)).toEqual(
      v1.edges.filter((e) => e.target === 'timer').map(() => 'timer'),
    );
    expect(diff.body.canvas).toEqual([]);

    const withCanvas = await http.get(`/api/agents/${agentId}/versions/1/diff/2?canvas=true`);
    expect(withCanvas.body.canvas).toEqual([
      { id: 'talk', fields: [{ name: 'position', after: { x: 5, y: 9 } }] },
    ]);
    expect((await http.get(`/api/agents/${agentId}/versions/1/diff/7`)).status).toBe(404);
  });
});
