import { fullFlow, lineSink, withNode } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logLiveKitAs } from '../../../services/playground/src/observability/telemetry.js';
import { lastUserText, startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

// LiveKit's lines from a real session, as the playground process writes them (main.ts calls logLiveKitAs).
const lines: string[] = [];
let stack: Stack;
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;

beforeAll(async () => {
  logLiveKitAs('info', lineSink(lines));
  stub = await startOpenAiStub((req) =>
    lastUserText(req).includes('fail') ? { status: 500 } : { text: `ok: ${lastUserText(req)}` },
  );
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
  await stub?.close();
});

describe("LiveKit's log lines in a session", () => {
  it('name the session, agent and request of a model error, in the stack format, without a stack trace', async () => {
    const http = api(stack.baseUrl);
    const flow = withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });
    const agentId = (await http.post('/api/agents', { name: 'Failing model', flow })).body.id as string;
    const started = await http.post(`/api/agents/${agentId}/text-sessions`, {});
    expect(started.status).toBe(201);
    const sessionId = started.body.sessionId as string;
    const requestId = 'req-model-fails-1';
    await http.post(
      `/api/agents/${agentId}/text-sessions/${sessionId}/turns`,
      { text: 'please fail' },
      { 'x-request-id': requestId },
    );
    await expect.poll(() => lines.length, { timeout: 10_000 }).toBeGreaterThan(0);
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const ours = parsed.filter((l) => l.sessionId === sessionId);
    expect(ours.length).toBeGreaterThan(0);
    for (const l of ours) {
      expect(l).toMatchObject({ service: 'playground', component: 'livekit', agentId, requestId });
      expect(l.time).toMatch(/^\d{4}-\d\d-\d\dT/);
    }
    // every LiveKit line of the run was written inside the session, and none carries a stack trace
    expect(parsed.filter((l) => l.sessionId === undefined)).toEqual([]);
    expect(lines.join('\n')).not.toMatch(/\n\s+at /);
    expect(lines.join('\n')).not.toMatch(/"stack"/);
  });
});
