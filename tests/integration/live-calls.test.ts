import { connect, type NatsConnection } from '@nats-io/transport-node';
import { busClientOf, type BusClient } from '@vab/bus';
import { AppError, Subjects, type CallSummary, type DeployRecord } from '@vab/contracts';
import { voiceFlow } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startStack, type Stack } from '../helpers/stack.js';

/**
 * Issue 45's calls in the sessions service, asked over the bus as the playground asks: admission against the
 * live deploy's caps (a refusal answers 429 with when to retry, and is itself recorded as a `busy` call while
 * the admitted call goes on), the end with its reason, the list and one call through the API, erasure.
 */

let stack: Stack;
let http: ReturnType<typeof api>;
let nc: NatsConnection;
let bus: BusClient;

// models at their own base URLs run without a key: this version is ready for callers
const flow = voiceFlow({ chatURL: 'http://127.0.0.1:9/v1', speechURL: 'http://127.0.0.1:9/v1' });

beforeAll(async () => {
  stack = await startStack();
  http = api(stack.baseUrl);
  nc = await connect({ servers: stack.natsUrl });
  bus = busClientOf(nc);
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await stack?.close();
});

async function liveDeploy(agentId: string, settings: Record<string, unknown>): Promise<DeployRecord> {
  const d = (await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, settings)).body;
  await expect
    .poll(async () => (await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`)).body[0]?.status, {
      timeout: 30_000,
    })
    .toBe('live');
  return d;
}

const admit = (subdomain: string, addressKey = 'a1') =>
  bus.request(
    Subjects.callsAdmit,
    { subdomain, channel: 'web', caller: { addressHash: addressKey }, addressKey, instanceId: 'pg-test' },
    { timeoutMs: 5000, requestId: 'test' },
  );

describe('calls', () => {
  it('admits within the deploy caps, records a refusal as busy, ends with its reason, lists, erases', async () => {
    const agentId = (await http.post('/api/agents', { name: 'Call desk', flow })).body.id as string;
    const deploy = await liveDeploy(agentId, { maxConcurrentCalls: 1 });

    const first = await admit(deploy.subdomain);
    expect(first).toMatchObject({ agentId, deployId: deploy.id, version: 1, credentials: null });
    expect(first.settings.maxConcurrentCalls).toBe(1);

    // the one slot is taken: the next caller hears "busy, retry after", and the refusal is a call too
    const refused = await admit(deploy.subdomain, 'a2').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toMatchObject({ code: 'CAPACITY_EXHAUSTED', retryAfterSeconds: 5 });

    const listed = await http.get<{ calls: CallSummary[] }>(`/api/agents/${agentId}/calls`);
    expect(listed.status).toBe(200);
    expect(listed.body.calls.map((c) => [c.status, c.endedReason])).toEqual([
      ['ended', 'busy'],
      ['active', null],
    ]);
    expect(listed.body.calls[0]!.endedDetail).toEqual({ kind: 'max_concurrent_calls' });

    await bus.request(
      Subjects.callsAppend,
      {
        agentId,
        callId: first.callId,
        message: {
          role: 'assistant',
          content: 'Hello, how can I help?',
          stepId: 'start',
          timestamp: Date.now(),
        },
      },
      { timeoutMs: 5000, requestId: 'test' },
    );
    await bus.request(
      Subjects.callsEnd,
      { agentId, callId: first.callId, endedAt: Date.now(), endedReason: 'caller_hung_up' },
      { timeoutMs: 5000, requestId: 'test' },
    );
    const one = await http.get(`/api/agents/${agentId}/calls/${first.callId}`);
    expect(one.body).toMatchObject({
      id: first.callId,
      channel: 'web',
      status: 'ended',
      endedReason: 'caller_hung_up',
      deployNumber: deploy.deployNumber,
      caller: { addressHash: 'a1' },
    });
    expect(one.body.messages.map((m: { content: string }) => m.content)).toEqual(['Hello, how can I help?']);

    // the slot is back
    const third = await admit(deploy.subdomain, 'a3');
    expect(third.callId).not.toBe(first.callId);

    // filters and a page at a time
    const busy = await http.get(`/api/agents/${agentId}/calls?endedReason=busy`);
    expect(busy.body.calls).toHaveLength(1);
    const page = await http.get(`/api/agents/${agentId}/calls?limit=1`);
    expect(page.body.calls).toHaveLength(1);
    const next = await http.get(`/api/agents/${agentId}/calls?limit=2&cursor=${page.body.nextCursor}`);
    expect(next.body.calls.map((c: CallSummary) => c.id)).not.toContain(page.body.calls[0].id);
    expect(next.body.calls).toHaveLength(2);

    // a call going on cannot be erased; an ended one is gone with its transcript
    expect((await http.delete(`/api/agents/${agentId}/calls/${third.callId}`)).status).toBe(409);
    expect((await http.delete(`/api/agents/${agentId}/calls/${first.callId}`)).status).toBe(200);
    expect((await http.get(`/api/agents/${agentId}/calls/${first.callId}`)).status).toBe(404);
  });

  it('holds one address to LIVE_MAX_CALLS_PER_ADDRESS calls at once (429 RATE_LIMITED)', async () => {
    const agentId = (await http.post('/api/agents', { name: 'Busy line', flow })).body.id as string;
    const deploy = await liveDeploy(agentId, { maxConcurrentCalls: 10 });
    for (let i = 0; i < 3; i++) await admit(deploy.subdomain, 'same-address');
    const fourth = await admit(deploy.subdomain, 'same-address').catch((e: unknown) => e);
    expect(fourth).toMatchObject({ code: 'RATE_LIMITED' });
    // another address is not held back by it
    await admit(deploy.subdomain, 'other-address');
  });
});
