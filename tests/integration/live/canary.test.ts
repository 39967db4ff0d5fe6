import type { NatsConnection } from '@nats-io/transport-node';
import type { BusClient } from '@vab/bus';
import type { DeployRecord, DomainEvent } from '@vab/contracts';
import { voiceFlow } from '@vab/testkit';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { lastUserText, offersTool, type ChatRequest } from '../../../services/playground/test/openai-stub.js';
import type { api } from '../../helpers/stack.js';
import { startVoiceStack, type VoiceStack } from '../../helpers/voice.js';
import { holdBusCall } from '../../helpers/live.js';

/**
 * Issue 47's canaries (decision 0035): a deploy with `trafficPercent` goes through the pipeline and takes its
 * share of new calls beside the live deploy, sticky per caller; the analyst (a stub model) fails every call of
 * the canary's version, so once each side has the documented minimum of judged calls (CANARY_MIN_CALLS, 4
 * here) the canary is rolled back by itself, the builder is told (event, webhook) and every new call runs the
 * live version; the two deploys side by side show why; a canary that does well is promoted by hand.
 */

const MIN_CALLS = 4;
let voice: VoiceStack;
let http: ReturnType<typeof api>;
let nc: NatsConnection;
let bus: BusClient;
let hooks: { server: Server; url: string; bodies: string[] };

/** The version whose calls the analyst fails (the canary's, in the first test). */
let failing = 2;

/** The analyst: a call whose agent says it is version `failing` fails "helpful"; any other passes it. */
function analyst(req: ChatRequest) {
  const transcript = lastUserText(req).split('\n\nCriterion')[0]!;
  if (offersTool(req, 'call_verdict')) {
    const bad = transcript.includes(`this is version ${failing}`);
    return {
      toolCalls: [
        {
          name: 'call_verdict',
          args: bad
            ? { verdict: 'failed', reason: 'the agent did not answer' }
            : { verdict: 'passed', reason: 'the agent answered' },
        },
      ],
    };
  }
  return { content: 'ok' };
}

beforeAll(async () => {
  voice = await startVoiceStack({
    chat: analyst,
    transcribe: () => '',
    // the deploy sweep (what promotes a canary whose window is over) passes every second, not every 15 s
    stack: { canary: { minCalls: MIN_CALLS, stickyMs: 600_000 }, deploys: { intervalMs: 1_000 } },
  });
  ({ http, nc, bus } = voice);
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      bodies.push(body);
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  hooks = { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies };
}, 60_000);
afterAll(async () => {
  hooks?.server.closeAllConnections();
  await new Promise<void>((r) => hooks?.server.close(() => r()) ?? r());
  await voice?.close();
});

const deploys = async (agentId: string) =>
  (await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`)).body;
const deployOf = async (agentId: string, id: string) => (await deploys(agentId)).find((d) => d.id === id)!;

/** Deploys (`body`) and waits until the pipeline has moved it to `status`. */
async function deployed(agentId: string, body: Record<string, unknown>, status: string) {
  const res = await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  await expect
    .poll(async () => (await deployOf(agentId, res.body.id)).status, { timeout: 30_000 })
    .toBe(status);
  return deployOf(agentId, res.body.id);
}

/**
 * A short call held over the bus, as the playground holds one (admitted, three lines, hung up): the agent's
 * greeting names the version the admission gave it. Answers the deploy it ran.
 */
async function call(subdomain: string, callerKey: string) {
  const admitted = await holdBusCall(bus, { subdomain, callerKey }, ({ version }) => [
    { role: 'assistant', content: `Hello, this is version ${version}.` },
    { role: 'user', content: 'What are your opening hours?' },
    { role: 'assistant', content: 'We open at nine.' },
  ]);
  return { deployId: admitted.deployId, version: admitted.version, callId: admitted.callId };
}

async function analysedAgent(name: string) {
  const flow = voice.flow();
  const agentId = (await http.post('/api/agents', { name, flow })).body.id as string;
  const settings = {
    enabled: true,
    summary: false,
    criteria: [{ name: 'helpful', description: 'The agent answered what the caller asked.' }],
    dataFields: [],
    model: null,
  };
  expect((await http.put(`/api/agents/${agentId}/analysis`, settings)).status).toBe(200);
  return { agentId, flow };
}

/** Publishes version 2 of the agent (another instruction). */
async function version2(agentId: string, flow: ReturnType<typeof voiceFlow>) {
  const v2 = { ...flow, nodes: flow.nodes.map((n) => (n.id === 'agent' ? { ...n, name: 'Clinic 2' } : n)) };
  expect((await http.patch(`/api/agents/${agentId}`, { flow: v2 })).body.version).toBe(2);
}

describe('canary deploys', () => {
  it('a canary worse on real calls is rolled back by itself after the minimum; callers keep their side', async () => {
    failing = 2;
    const { agentId, flow } = await analysedAgent('Canary desk');
    // a canary needs a live deploy beside it; a share is 1–99 %
    const alone = await http.post(`/api/agents/${agentId}/deploys`, { trafficPercent: 50 });
    expect(alone.status).toBe(409);
    expect(alone.body.code).toBe('CONFLICT');
    expect((await http.post(`/api/agents/${agentId}/deploys`, { trafficPercent: 100 })).status).toBe(400);
    const live = await deployed(agentId, {}, 'live');
    await version2(agentId, flow);
    const hook = await http.post(`/api/agents/${agentId}/webhooks`, {
      url: hooks.url,
      events: ['deploy.rolled_back'],
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const rolledEvents: DomainEvent[] = [];
    const sub = nc.subscribe(`domain.${agentId}.deploy.rolled_back`, {
      callback: (_e, m) => void rolledEvents.push(m.json<DomainEvent>()),
    });

    const canary = await deployed(agentId, { trafficPercent: 50 }, 'canary');
    expect(canary).toMatchObject({ version: 2, trafficPercent: 50 });
    expect(await deployOf(agentId, live.id)).toMatchObject({ status: 'live' });

    // both sides take calls; a caller keeps the side it was drawn on
    const sides = { canary: 0, live: 0 };
    const count = (deployId: string) => (deployId === canary.id ? sides.canary++ : sides.live++);
    let sticky: string | undefined;
    for (let i = 0; i < 60 && (sides.canary < MIN_CALLS || sides.live < MIN_CALLS || !sticky); i++) {
      const caller = `caller-${randomUUID()}`;
      const first = await call(canary.subdomain, caller);
      count(first.deployId);
      if (first.deployId === canary.id && !sticky) {
        sticky = caller;
        for (let again = 0; again < 2; again++) {
          const next = await call(canary.subdomain, caller);
          expect(next).toMatchObject({ deployId: canary.id, version: 2 });
          count(next.deployId);
        }
      }
    }
    expect(sides.canary).toBeGreaterThanOrEqual(MIN_CALLS);
    expect(sides.live).toBeGreaterThanOrEqual(MIN_CALLS);

    // once every call is judged, the rule fires: rolled back with the figures that made it
    await expect
      .poll(async () => (await deployOf(agentId, canary.id)).status, { timeout: 45_000 })
      .toBe('rolled_back');
    const rolled = await deployOf(agentId, canary.id);
    expect(rolled.rollback).toMatchObject({
      rule: 'success_rate',
      canary: { deployId: canary.id, passed: 0, successRate: 0 },
      live: { deployId: live.id, successRate: 1 },
    });
    expect(rolled.rollback!.canary.judged).toBeGreaterThanOrEqual(MIN_CALLS);
    expect(rolled.rollback!.live.judged).toBeGreaterThanOrEqual(MIN_CALLS);
    expect(rolled.rollback!.z).toBeGreaterThan(1.645);
    expect(await deployOf(agentId, live.id)).toMatchObject({ status: 'live' });

    // every new call runs the live version, the sticky canary caller's too
    for (const caller of [sticky!, ...Array.from({ length: 8 }, () => `after-${randomUUID()}`)]) {
      expect(await call(canary.subdomain, caller)).toMatchObject({ deployId: live.id, version: 1 });
    }

    // the builder is told: the event on the agent's stream, and the webhook
    await vi.waitFor(() => expect(rolledEvents).toHaveLength(1), { timeout: 10_000 });
    expect(rolledEvents[0]!.data).toMatchObject({
      deploy: { id: canary.id, status: 'rolled_back' },
      live: { id: live.id },
    });
    await vi.waitFor(
      () =>
        expect(hooks.bodies.map((b) => (JSON.parse(b) as DomainEvent).type)).toContain('deploy.rolled_back'),
      { timeout: 15_000 },
    );
    sub.unsubscribe();

    // side by side: the canary's success rate against the live one's
    const compared = await http.get(
      `/api/agents/${agentId}/deploys/compare?deployIds=${live.id},${canary.id}`,
    );
    expect(compared.status).toBe(200);
    expect(compared.body).toMatchObject({
      a: { deployId: live.id, successRate: 1 },
      b: { deployId: canary.id, successRate: 0 },
      difference: { successRate: -1 },
    });
    expect(compared.body.difference.successZ).toBeLessThan(-1.645);
    // no canary runs: the default pair does not exist; a rolled-back canary cannot be promoted
    expect((await http.get(`/api/agents/${agentId}/deploys/compare`)).status).toBe(404);
    expect((await http.get(`/api/agents/${agentId}/deploys/compare?deployIds=x`)).status).toBe(400);
    expect((await http.post(`/api/agents/${agentId}/deploys/${canary.id}/promote`, {})).status).toBe(409);
  }, 120_000);

  it('a canary promoted by hand, or after its window, becomes the full live deploy at once', async () => {
    failing = 0; // every call passes: no rollback
    const { agentId, flow } = await analysedAgent('Promoted desk');
    const live = await deployed(agentId, {}, 'live');
    await version2(agentId, flow);
    const canary = await deployed(agentId, { trafficPercent: 10 }, 'canary');
    // the default pair: the running canary against the live deploy
    const compared = await http.get(`/api/agents/${agentId}/deploys/compare`);
    expect(compared.status).toBe(200);
    expect(compared.body).toMatchObject({ a: { deployId: live.id }, b: { deployId: canary.id } });

    const promoted = await http.post(`/api/agents/${agentId}/deploys/${canary.id}/promote`, {});
    expect(promoted.status, JSON.stringify(promoted.body)).toBe(200);
    expect(promoted.body).toMatchObject({ id: canary.id, status: 'live', promoted: { by: 'hand' } });
    expect(await deployOf(agentId, live.id)).toMatchObject({ status: 'superseded' });
    for (let i = 0; i < 5; i++)
      expect(await call(canary.subdomain, `p-${randomUUID()}`)).toMatchObject({
        deployId: canary.id,
        version: 2,
      });
    expect((await http.post(`/api/agents/${agentId}/deploys/${canary.id}/promote`, {})).status).toBe(409);

    // a canary with a window, not rolled back within it, is promoted by itself when it is over
    const timed = await deployed(
      agentId,
      { version: 1, trafficPercent: 50, canaryWindowMs: 10_000 },
      'canary',
    );
    await expect
      .poll(async () => (await deployOf(agentId, timed.id)).status, { timeout: 40_000, interval: 500 })
      .toBe('live');
    expect(await deployOf(agentId, timed.id)).toMatchObject({ promoted: { by: 'window' } });
    expect(await deployOf(agentId, canary.id)).toMatchObject({ status: 'superseded' });
    expect(await call(canary.subdomain, `w-${randomUUID()}`)).toMatchObject({
      deployId: timed.id,
      version: 1,
    });
  }, 90_000);
});
