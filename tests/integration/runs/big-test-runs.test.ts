import { fullFlow, withNode } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  clinicScript,
  startOpenAiStub,
  type ChatRequest,
} from '../../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/** Every reply is long: what a run stores grows with each turn of each repeat. */
const LONG_REPLY = `ok: ${'r'.repeat(15_000)}`;
const TURN = (i: number) => `turn ${i} ${'u'.repeat(3_990)}`;
const TURNS = Array.from({ length: 12 }, (_, i) => TURN(i));

let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
let stack: Stack;
let http: ReturnType<typeof api>;

beforeAll(async () => {
  stub = await startOpenAiStub((req: ChatRequest) =>
    req.tools?.length ? clinicScript(req) : { content: LONG_REPLY },
  );
  stack = await startStack({ testRuns: { concurrency: 8 } });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack?.close();
  await stub?.close();
});

describe('a big test run stays readable (issue 35 #7)', () => {
  it('2 cases × 20 repeats × 12 turns of 4,000 + 15,000 characters: read whole, paged, listed', async () => {
    const flow = withNode(withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }), 'hook', {
      url: 'http://127.0.0.1:9/x',
    });
    const agentId = (await http.post('/api/agents', { name: 'Big', flow })).body.id as string;
    for (const name of ['long one', 'long two']) {
      const c = await http.post(`/api/agents/${agentId}/test-cases`, {
        name,
        turns: TURNS,
        repeat: 20,
        expect: { replyContains: ['ok'] },
      });
      expect(c.status).toBe(201);
    }
    const started = await http.post(`/api/agents/${agentId}/test-runs`, {
      apiKeys: { openai: 'key-123456' },
    });
    expect(started.status).toBe(202);
    const runId = started.body.id as string;
    await expect
      .poll(async () => (await http.get(`/api/agents/${agentId}/test-runs/${runId}`)).body.finishedAt, {
        timeout: 180_000,
        interval: 500,
      })
      .not.toBeNull();

    // every page answers, within the bus's limit, and together they hold every case with every repeat
    const cases = [];
    let from: number | null = 0;
    let pages = 0;
    while (from !== null) {
      const res = await fetch(`${stack.baseUrl}/api/agents/${agentId}/test-runs/${runId}?casesFrom=${from}`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text.length).toBeLessThan(8 * 1024 * 1024);
      const page = JSON.parse(text) as { cases: { repeats: unknown[] }[]; nextCasesFrom: number | null };
      cases.push(...page.cases);
      from = page.nextCasesFrom;
      pages++;
    }
    expect(cases).toHaveLength(2);
    const repeats = cases.flatMap((c) => c.repeats) as {
      observed: { userTurns: string[]; replies: string[][]; sessionId: string };
    }[];
    expect(repeats).toHaveLength(40);
    for (const r of repeats) {
      const stored = [...r.observed.userTurns, ...r.observed.replies.flat()].join('');
      expect(stored.length).toBeLessThan(24_000); // the attempt's budget, markers included
      expect(stored).toContain('…[truncated');
    }
    // the whole transcript of an attempt is its test session's
    const messages = await http.get(
      `/api/agents/${agentId}/test-sessions/${repeats[0]!.observed.sessionId}/messages`,
    );
    expect(messages.body.filter((m: { role: string }) => m.role === 'user')).toHaveLength(12);

    // the list answers too: verdicts and pass rates, no per-case details
    const list = await http.get(`/api/agents/${agentId}/test-runs`);
    expect(list.status).toBe(200);
    expect(list.body[0]).toMatchObject({ id: runId, counts: { total: 2 } });
    expect(list.body[0].cases[0]).toMatchObject({
      repeats: [],
      observed: null,
      passRate: expect.any(Number),
    });
    console.log(`[big run] ${pages} page(s), ${JSON.stringify(cases).length} bytes of cases`);
    // 40 attempts of 12 turns each: 20 s on a quiet machine, past 30 s at load average 15–29
  }, 120_000);
});
