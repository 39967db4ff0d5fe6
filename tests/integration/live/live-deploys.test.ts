import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import {
  DOMAIN_EVENTS_STREAM,
  LIVE_DEPLOYS_BUCKET,
  LiveDeploy,
  type DeployRecord,
  type DomainEvent,
} from '@vab/contracts';
import { voiceFlow } from '@vab/testkit';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/**
 * Issue 45's deploy pipeline, on a real stack: a deploy moves by itself (`pending` → `building` → `live` or
 * `failed` with the readiness issues, checked as a public caller's start would run it: the agent's stored
 * credentials, never a request's), the previous live one is superseded, a rollback pins an older version, and
 * what is live reaches the KV bucket live-deploys and the stream DOMAIN_EVENTS. Stored credentials are sealed
 * and never come back, nor reach a log line or an event.
 */

const KEY = `sk-live-deploys-${randomBytes(12).toString('hex')}`;
const CREDENTIALS_KEY = randomBytes(32).toString('hex');

let stack: Stack;
let http: ReturnType<typeof api>;
let nc: NatsConnection;

/**
 * The agent's model is OpenAI's own (no base URL) and the server has no OpenAI key: only the agent's stored
 * key lets a public caller's start run it. Its speech models are at a base URL (they run without a key).
 */
const flowOf = (instructions: string) => {
  const f = voiceFlow({
    chatURL: 'http://127.0.0.1:9/v1',
    speechURL: 'http://127.0.0.1:9/v1',
    agent: { instructions },
  });
  return {
    ...f,
    nodes: f.nodes.map((n) =>
      n.id === 'llm' ? { id: 'llm', nodeType: 'llm', provider: 'openai', model: 'gpt-4o-mini' } : n,
    ),
  };
};
const flow = flowOf('You book appointments.');

beforeAll(async () => {
  stack = await startStack({ playground: { CREDENTIALS_KEY } });
  http = api(stack.baseUrl);
  nc = await connect({ servers: stack.natsUrl });
});
afterAll(async () => {
  await nc?.close();
  await stack?.close();
});

/** The deploy once the pipeline has finished with it (it never stays `pending` or `building`). */
async function settled(agentId: string, deployId: string): Promise<DeployRecord> {
  let found: DeployRecord | undefined;
  await expect
    .poll(
      async () => {
        const list = await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`);
        found = list.body.find((d) => d.id === deployId);
        return found?.status;
      },
      { timeout: 30_000, interval: 100 },
    )
    .toMatch(/^(live|failed)$/);
  return found!;
}

async function domainEvents(agentId: string): Promise<DomainEvent[]> {
  const jsm = await jetstreamManager(nc);
  const { state } = await jsm.streams.info(DOMAIN_EVENTS_STREAM);
  const out: DomainEvent[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(DOMAIN_EVENTS_STREAM, { seq });
    if (m?.subject.startsWith(`domain.${agentId}.`)) out.push(m.json<DomainEvent>());
  }
  return out;
}

describe('the deploy pipeline', () => {
  it('fails a version whose readiness fails, with the issues; goes live with stored credentials; supersedes; rolls back', async () => {
    const agentId = (await http.post('/api/agents', { name: 'Live clinic', flow })).body.id as string;

    // no stored credentials: the flow's models have no key a public caller's start could use
    const first = await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, { maxConcurrentCalls: 3 });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ status: 'pending', version: 1, maxConcurrentCalls: 3 });
    expect(first.body.maxCallDurationMs).toBe(600_000);
    const failed = await settled(agentId, first.body.id);
    expect(failed.status).toBe('failed');
    expect(failed.failure?.issues.length).toBeGreaterThan(0);
    expect(failed.failure?.issues.map((i) => i.code)).toContain('MISSING_CREDENTIALS');

    // an unknown provider is a 400 naming it; stored keys come back as `set` and their last 4 only
    const unknown = await http.put(`/api/agents/${agentId}/credentials`, { apiKeys: { acme: 'x' } });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body)).toContain('acme');
    const put = await http.put(`/api/agents/${agentId}/credentials`, { apiKeys: { openai: KEY } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body.apiKeys).toEqual({ openai: { set: true, last4: KEY.slice(-4) } });
    const got = await http.get(`/api/agents/${agentId}/credentials`);
    expect(got.body.apiKeys).toEqual({ openai: { set: true, last4: KEY.slice(-4) } });

    const second = (await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`)).body;
    const live = await settled(agentId, second.id);
    expect(live.status, JSON.stringify(live.failure)).toBe('live');
    expect(live.liveAt).toBeGreaterThan(0);

    // the bucket every instance watches says so, by subdomain
    const kv = await new Kvm(nc).open(LIVE_DEPLOYS_BUCKET);
    const entry = LiveDeploy.parse((await kv.get(live.subdomain))!.json());
    expect(entry).toMatchObject({ agentId, deployId: live.id, version: 1 });

    // version 2, deployed, then a rollback pinning version 1: the newest live one supersedes the others
    const flow2 = flowOf('v2');
    expect((await http.patch(`/api/agents/${agentId}`, { flow: flow2 })).body.version).toBe(2);
    const v2 = (await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`)).body;
    expect(v2.version).toBe(2);
    expect((await settled(agentId, v2.id)).status).toBe('live');
    const rollback = (await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, { version: 1 })).body;
    expect(rollback.version).toBe(1);
    expect((await settled(agentId, rollback.id)).status).toBe('live');
    const all = (await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`)).body;
    expect(Object.fromEntries(all.map((d) => [d.deployNumber, d.status]))).toEqual({
      1: 'failed',
      2: 'superseded',
      3: 'superseded',
      4: 'live',
    });
    await expect
      .poll(async () => LiveDeploy.parse((await kv.get(live.subdomain))!.json()).deployId)
      .toBe(rollback.id);

    // settings of the live deploy change for the next call, on every instance
    const patched = await http.patch(`/api/agents/${agentId}/deploys/${rollback.id}`, {
      maxConcurrentCalls: 1,
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ status: 'live', maxConcurrentCalls: 1 });
    await expect
      .poll(async () => LiveDeploy.parse((await kv.get(live.subdomain))!.json()).settings.maxConcurrentCalls)
      .toBe(1);

    // the domain events: one failed, three live
    const events = await domainEvents(agentId);
    expect(events.filter((e) => e.type === 'deploy.failed')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'deploy.live')).toHaveLength(3);

    // the key never came back in a reply, nor reached a log line or an event
    expect(JSON.stringify(events)).not.toContain(KEY);
    expect(stack.logs.join('\n')).not.toContain(KEY);
    const sealed = await stack.redis.hget(`ss:{${agentId}}:cred`, 'sealed');
    expect(sealed).not.toBeNull();
    expect(sealed).not.toContain(KEY);
  });

  it('leaves a deploy made for an external deployer to its PATCHes', async () => {
    const agentId = (await http.post('/api/agents', { name: 'External', flow })).body.id as string;
    const d = (await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, { external: true })).body;
    expect(d).toMatchObject({ status: 'pending', external: true });
    expect((await http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'building' })).status).toBe(
      200,
    );
    const live = await http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'live' });
    expect(live.body.status).toBe('live');
  });
});

describe('publishable keys', () => {
  it('are shown once, listed without their value, revoked', async () => {
    const agentId = (await http.post('/api/agents', { name: 'Widget', flow })).body.id as string;
    const created = await http.post(`/api/agents/${agentId}/public-keys`, {
      allowedOrigins: ['https://shop.example.com'],
    });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^pk_/);
    // useless anywhere but /live, even on this open API
    const misused = await http.get('/api/agents', { authorization: `Bearer ${created.body.key}` });
    expect(misused.status).toBe(401);
    const list = await http.get(`/api/agents/${agentId}/public-keys`);
    expect(list.body.keys).toHaveLength(1);
    expect(JSON.stringify(list.body)).not.toContain(created.body.key);
    const bad = await http.post(`/api/agents/${agentId}/public-keys`, {
      allowedOrigins: ['shop.example.com/x'],
    });
    expect(bad.status).toBe(400);
    const revoked = await http.delete(`/api/agents/${agentId}/public-keys/${created.body.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.revokedAt).toBeGreaterThan(0);
  });
});
