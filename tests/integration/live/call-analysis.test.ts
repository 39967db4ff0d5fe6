import type { NatsConnection } from '@nats-io/transport-node';
import type { BusClient } from '@vab/bus';
import { Subjects, type CallSummary, type DomainEvent } from '@vab/contracts';
import { speak } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  offersTool,
  type ChatReply,
  type ChatRequest,
} from '../../../services/playground/test/openai-stub.js';
import { stubAnalyst } from '../../helpers/analyst.js';
import {
  holdBusCall,
  joinCall,
  liveDeploy,
  sayAndHear,
  startWebCall,
  type CallLine,
} from '../../helpers/live.js';
import type { api, Stack } from '../../helpers/stack.js';
import { scriptedHearing, startVoiceStack, type VoiceStack } from '../../helpers/voice.js';

/**
 * Issue 47's post-call analysis: a web call ends, the playground's worker takes its job from the queue and the
 * analyst (the stub model, as the simulated callers' judges are stubbed) summarises it, judges the agent's
 * criteria and extracts its data fields; the call shows the result, the list filters on success, a call too
 * short to judge is marked so, a re-run follows changed criteria, erasing the call erases its analysis.
 */

let stack: Stack;
let http: ReturnType<typeof api>;
let nc: NatsConnection;
let bus: BusClient;
let voice: VoiceStack;
const hearing = scriptedHearing();

/** Set: the next summary asked for hangs (its instance is to die while it waits). */
const hang = { next: false, seen: false };

/** The stub analyst (tests/helpers/analyst.ts), whose next summary hangs when `hang.next` says so. */
function analyst(req: ChatRequest): ChatReply {
  if (offersTool(req, 'summary') && hang.next) {
    hang.next = false;
    hang.seen = true;
    return { toolCalls: [{ name: 'summary', args: { summary: 'never read' } }], delayMs: 20_000 };
  }
  return stubAnalyst(req);
}

beforeAll(async () => {
  voice = await startVoiceStack({
    chat: analyst,
    transcribe: hearing.transcribe,
    // a job left by a dead instance comes back within seconds, not the default minute
    stack: { playground: { ANALYSIS_ACK_WAIT_MS: 3000 } },
  });
  ({ stack, http, nc, bus } = voice);
}, 60_000);
afterAll(() => voice?.close());

const ask = { timeoutMs: 5000, requestId: 'test' };

/** A call held over the bus, as the playground holds one: these lines, then the caller hangs up. */
const busCall = async (subdomain: string, lines: CallLine[]) =>
  (await holdBusCall(bus, { subdomain }, () => lines)).callId;

const analysisOf = async (agentId: string, callId: string) =>
  (await http.get<CallSummary>(`/api/agents/${agentId}/calls/${callId}`)).body.analysis;

describe('call analysis', () => {
  it('analyses every ended call off its path: verdicts, summary, data; the list filters on success', async () => {
    const liveFlow = voice.flow();
    const agentId = (await http.post('/api/agents', { name: 'Analysed desk', flow: liveFlow })).body
      .id as string;

    // strict at our edge: an unknown field is refused
    const bad = await http.put(`/api/agents/${agentId}/analysis`, { enabled: true, summary: true, extra: 1 });
    expect(bad.status).toBe(400);
    expect((await http.get(`/api/agents/${agentId}/analysis`)).body).toMatchObject({ enabled: false });
    const settings = {
      enabled: true,
      summary: true,
      criteria: [{ name: 'booked', description: 'The caller got the appointment they asked for.' }],
      dataFields: [
        { name: 'wants_booking', type: 'boolean' },
        { name: 'topic', type: 'enum', options: ['booking', 'other'] },
      ],
      model: null,
    };
    expect((await http.put(`/api/agents/${agentId}/analysis`, settings)).status).toBe(200);
    const deploy = await liveDeploy(http, agentId);

    const analysed: DomainEvent[] = [];
    const sub = nc.subscribe(`domain.${agentId}.call.analyzed`, {
      callback: (_e, m) => void analysed.push(m.json<DomainEvent>()),
    });

    // a web call: the caller asks for an appointment over the voice socket and hangs up
    const spoken = speak('I would like to book an appointment');
    hearing.willHear('I would like to book an appointment');
    const { status, started } = await startWebCall(stack.baseUrl, deploy.subdomain);
    expect(status, JSON.stringify(started)).toBe(201);
    const client = await joinCall(stack.baseUrl, started.audioPath);
    await sayAndHear(client, spoken);
    client.close();
    await client.closed;

    // the call closes first; its analysis arrives after
    await expect
      .poll(async () => (await http.get(`/api/agents/${agentId}/calls/${started.callId}`)).body.status, {
        timeout: 15_000,
      })
      .toBe('ended');
    await expect.poll(() => analysisOf(agentId, started.callId), { timeout: 30_000 }).not.toBeNull();
    const analysis = await analysisOf(agentId, started.callId);
    expect(analysis).toMatchObject({
      summary: 'The caller booked.',
      criteria: [{ name: 'booked', verdict: 'passed', reason: 'the caller asked for an appointment' }],
      success: true,
      data: { wants_booking: true, topic: 'booking' },
      model: { provider: 'openai' },
    });
    expect((analysis as { usage: unknown[] }).usage.length).toBeGreaterThan(0);

    // a call that fails its criterion, and one too short to judge (the caller never spoke)
    const failing = await busCall(deploy.subdomain, [
      { role: 'assistant', content: 'Hello, how can I help?' },
      { role: 'user', content: 'What are your opening hours?' },
      { role: 'assistant', content: 'We open at nine.' },
    ]);
    const short = await busCall(deploy.subdomain, [{ role: 'assistant', content: 'Hello, how can I help?' }]);
    await expect
      .poll(() => analysisOf(agentId, failing), { timeout: 30_000 })
      .toMatchObject({
        success: false,
        criteria: [{ name: 'booked', verdict: 'failed' }],
        data: { wants_booking: false, topic: 'other' },
      });
    await expect
      .poll(() => analysisOf(agentId, short), { timeout: 30_000 })
      .toMatchObject({ skipped: 'too_short' });

    const ids = async (q: string) =>
      (await http.get<{ calls: CallSummary[] }>(`/api/agents/${agentId}/calls?${q}`)).body.calls.map(
        (c) => c.id,
      );
    expect(await ids('success=true')).toEqual([started.callId]);
    expect(await ids('success=false')).toEqual([failing]);
    expect((await http.get(`/api/agents/${agentId}/calls?success=maybe`)).status).toBe(400);
    expect(await ids('criterion=booked:failed')).toEqual([failing]);
    expect(await ids('criterion=booked:passed')).toEqual([started.callId]);
    expect((await http.get(`/api/agents/${agentId}/calls?criterion=booked`)).status).toBe(400);

    // the deploy's figures from its calls: the judged two split the success rate; the voice call measured turns
    const stats = (await http.get(`/api/agents/${agentId}/deploys/${deploy.id}/stats`)).body;
    expect(stats).toMatchObject({
      deployId: deploy.id,
      deployNumber: deploy.deployNumber,
      version: 1,
      calls: 3,
      connected: 3,
      endedReasons: { caller_hung_up: 3 },
      analysed: 2,
      passed: 1,
      failed: 1,
      successRate: 0.5,
    });
    expect(stats.minutes).toBeGreaterThan(0);
    expect(stats.responseMs.count).toBeGreaterThanOrEqual(1);
    expect(stats.responseMs.p50).toBeLessThanOrEqual(stats.responseMs.p99);
    expect(stats.usage.map((u: { kind: string }) => u.kind)).toContain('llm');
    expect((await http.get(`/api/agents/${agentId}/deploys/nope/stats`)).status).toBe(404);

    // the webhooks service hears of each result (the too-short one too), once per job
    await vi.waitFor(() => expect(analysed).toHaveLength(3), { timeout: 10_000 });
    const byCall = Object.fromEntries(analysed.map((e) => [e.data.callId as string, e.data.analysis]));
    expect(byCall[started.callId]).toMatchObject({ success: true });

    // criteria changed: a re-run follows them (an unknown verdict leaves success open)
    await http.put(`/api/agents/${agentId}/analysis`, {
      ...settings,
      criteria: [...settings.criteria, { name: 'polite', description: 'The agent thanked the caller.' }],
    });
    const rerun = await http.post(`/api/agents/${agentId}/calls/${started.callId}/analysis`, {});
    expect(rerun.status).toBe(202);
    await expect
      .poll(() => analysisOf(agentId, started.callId), { timeout: 30_000 })
      .toMatchObject({
        criteria: [
          { name: 'booked', verdict: 'passed' },
          { name: 'polite', verdict: 'unknown', reason: 'not shown' },
        ],
        success: null,
      });

    // erased: the call and its analysis are gone, and the erasure is an event (its deliveries are cancelled)
    const erased: DomainEvent[] = [];
    const sub2 = nc.subscribe(`domain.${agentId}.call.erased`, {
      callback: (_e, m) => void erased.push(m.json<DomainEvent>()),
    });
    expect((await http.delete(`/api/agents/${agentId}/calls/${failing}`)).status).toBe(200);
    expect((await http.get(`/api/agents/${agentId}/calls/${failing}`)).status).toBe(404);
    expect((await http.post(`/api/agents/${agentId}/calls/${failing}/analysis`, {})).status).toBe(404);
    await vi.waitFor(() => expect(erased.map((e) => e.data.callId)).toEqual([failing]), { timeout: 10_000 });
    expect(await ids('success=false')).toEqual([]);
    sub.unsubscribe();
    sub2.unsubscribe();
  }, 150_000);

  it('stores at most one result per job: a redelivered job and an older one leave the newer result', async () => {
    const flow = voice.flow();
    const agentId = (await http.post('/api/agents', { name: 'Stored once', flow })).body.id as string;
    const deploy = await liveDeploy(http, agentId);
    // analysis off: no job of the worker's races these
    const callId = await busCall(deploy.subdomain, [{ role: 'assistant', content: 'Hello' }]);
    const result = (summary: string, at: number) => ({
      summary,
      criteria: [],
      success: null,
      data: {},
      model: { provider: 'openai', model: 'm' },
      usage: [],
      at,
    });
    const store = (jobId: string, requestedAt: number, summary: string) =>
      bus.request(
        Subjects.callsAnalysisStore,
        { agentId, callId, jobId, requestedAt, analysis: result(summary, requestedAt) },
        ask,
      );
    const analysed: DomainEvent[] = [];
    const sub = nc.subscribe(`domain.${agentId}.call.analyzed`, {
      callback: (_e, m) => void analysed.push(m.json<DomainEvent>()),
    });
    expect(await store('job-b', 2000, 'second')).toEqual({ stored: true });
    // the same job again (its ack was lost, it came back): not stored, no second event
    expect(await store('job-b', 2000, 'second again')).toEqual({ stored: false });
    // a job asked for before it, finishing late: the newer result stays
    expect(await store('job-a', 1000, 'first')).toEqual({ stored: false });
    expect(await analysisOf(agentId, callId)).toMatchObject({ summary: 'second' });
    expect(await store('job-c', 3000, 'third')).toEqual({ stored: true });
    expect(await analysisOf(agentId, callId)).toMatchObject({ summary: 'third' });
    await vi.waitFor(() => expect(analysed.map((e) => e.data.analysis)).toHaveLength(2), { timeout: 10_000 });
    sub.unsubscribe();
    // a call going on is not analysed by hand
    const active = await bus.request(
      Subjects.callsAdmit,
      { subdomain: deploy.subdomain, channel: 'web', caller: {}, instanceId: 'pg-test' },
      ask,
    );
    expect((await http.post(`/api/agents/${agentId}/calls/${active.callId}/analysis`, {})).status).toBe(409);
  }, 60_000);

  // last: it takes the stack's playground instance down
  it('a job whose instance dies mid-analysis is analysed by another instance, once', async () => {
    const flow = voice.flow();
    const agentId = (await http.post('/api/agents', { name: 'Outlives', flow })).body.id as string;
    await http.put(`/api/agents/${agentId}/analysis`, {
      enabled: true,
      summary: true,
      criteria: [],
      dataFields: [],
      model: null,
    });
    const deploy = await liveDeploy(http, agentId);
    const analysed: DomainEvent[] = [];
    const sub = nc.subscribe(`domain.${agentId}.call.analyzed`, {
      callback: (_e, m) => void analysed.push(m.json<DomainEvent>()),
    });
    hang.next = true;
    const callId = await busCall(deploy.subdomain, [
      { role: 'assistant', content: 'Hello, how can I help?' },
      { role: 'user', content: 'What are your opening hours?' },
    ]);
    // the instance took the job and waits on its model: it dies there, its job unacknowledged
    await vi.waitFor(() => expect(hang.seen).toBe(true), { timeout: 15_000 });
    await stack.services.playground.crash();
    const other = await stack.addPlayground();
    try {
      await expect
        .poll(() => analysisOf(agentId, callId), { timeout: 30_000 })
        .toMatchObject({ summary: 'The caller asked.', success: null });
      await vi.waitFor(() => expect(analysed).toHaveLength(1), { timeout: 10_000 });
      expect(analysed[0]!.data).toMatchObject({ callId, analysis: { summary: 'The caller asked.' } });
    } finally {
      sub.unsubscribe();
      await other.stop();
    }
  }, 90_000);
});
