import { Objm } from '@nats-io/obj';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { RECORDINGS_BUCKET, recordingObject, Subjects } from '@vab/contracts';
import { connectNats } from '@vab/bus';
import { buildGateway } from '@vab/gateway';
import { CallerSlots, CALLER_SLOTS_BUCKET } from '@vab/playground';
import { createLogger } from '@vab/service-kit';
import { startLocalNats, startLocalNatsCluster } from '@vab/testkit';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const EVENTS = '/api/agents/nobody/test-sessions/nothing/events';
import { api, startStack, type Stack } from '../../helpers/stack.js';

// The deployment's own NATS configuration (docker-compose mounts it): users, passwords, permissions.
const CONFIG = join(import.meta.dirname, '..', '..', '..', 'deploy', 'nats.conf');
const passwords = {
  gateway: 'gw-pass-test',
  agents: 'ag-pass-test',
  sessions: 'ss-pass-test',
  playground: 'pg-pass-test',
  telephony: 'tp-pass-test',
  webhooks: 'wh-pass-test',
};
const credentials = Object.fromEntries(
  Object.entries(passwords).map(([user, pass]) => [user, { user, pass }]),
) as Record<keyof typeof passwords, { user: string; pass: string }>;
/** The passwords as the deployment's NATS users read them (deploy/nats-users.conf: NATS_<USER>_PASSWORD). */
const passwordEnv = Object.fromEntries(
  Object.entries(passwords).map(([user, pass]) => [`NATS_${user.toUpperCase()}_PASSWORD`, pass]),
);

let nats: Awaited<ReturnType<typeof startLocalNats>>;
let stack: Stack;
let http: ReturnType<typeof api>;
const impostors: NatsConnection[] = [];

beforeAll(async () => {
  nats = await startLocalNats({
    configFile: CONFIG,
    env: passwordEnv,
  });
  stack = await startStack({
    natsUrl: nats.url,
    natsCredentials: credentials,
    maxVersions: 2,
    testSessionDays: 7,
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  for (const nc of impostors) await nc.close().catch(() => undefined);
  await stack.close();
  await nats.dispose();
});

const TOKEN = 'ticket-gateway-token-0123';

/** One more gateway with API tokens on `natsUrl`, as the gateway user: where tickets are made and used. */
async function tokenGateway(natsUrl: string) {
  const log = createLogger('gateway', 'silent');
  const nc = await connectNats(
    { url: natsUrl, name: 'gateway', service: 'gateway', user: 'gateway', pass: passwords.gateway },
    log,
  );
  const app = await buildGateway({
    nc,
    log,
    accessLog: { request: () => undefined },
    config: {
      BODY_LIMIT_BYTES: 1024 * 1024,
      REQUEST_TIMEOUT_MS: 5000,
      READY_TIMEOUT_MS: 500,
      security: { apiTokens: [TOKEN] },
    },
  });
  const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    ticket: async (path: string) => {
      const res = await fetch(`${baseUrl}/api/tickets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ path }),
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { ticket: string }).ticket;
    },
    get: async (path: string) => (await fetch(baseUrl + path)).status,
    close: async () => {
      await app.close();
      await nc.drain();
    },
  };
}

async function as(user: keyof typeof passwords, inbox = `_INBOX_${user}`) {
  const nc = await connect({ servers: nats.url, user, pass: passwords[user], inboxPrefix: inbox });
  impostors.push(nc);
  return nc;
}

describe('NATS with per-service users and permissions', () => {
  it('serves every path the services need: gateway → services, sessions → agents, playground → both', async () => {
    const agent = await http.post('/api/agents', { name: 'Permitted' });
    expect(agent.status).toBe(201);
    const session = await http.post(`/api/agents/${agent.body.id}/test-sessions`, { sessionType: 'text' });
    expect(session.status).toBe(201); // sessions asked agents.lookup
    expect((await http.get('/api/env-keys')).status).toBe(200);
    // agents asks sessions which versions deploys pin before its retention removes any
    for (const label of ['b', 'c']) {
      await http.patch(`/api/agents/${agent.body.id}`, { flow: { nodes: [{ id: label }], edges: [] } });
    }
    await stack.services.agents.agents!.retention.idle();
    const versions = (await http.get(`/api/agents/${agent.body.id}/versions`)).body;
    expect(versions.map((v: { version: number }) => v.version)).toEqual([2, 3]);
    // a test run on an older version: sessions asks agents which versions are still kept
    await http.post(`/api/agents/${agent.body.id}/test-cases`, { name: 'any', turns: ['Hi'] });
    // a case with mocks: sessions asks agents.get for the latest flow they are checked against (no such tool)
    const mocked = await http.post(`/api/agents/${agent.body.id}/test-cases`, {
      name: 'mocked',
      turns: ['Hi'],
      mocks: { tools: { refund_order: { result: 'ok' } } },
    });
    expect(mocked.status).toBe(400);
    expect(mocked.body.issues.map((i: { path: string }) => i.path)).toContain(
      'body.mocks.tools.refund_order',
    );
    expect((await http.post(`/api/agents/${agent.body.id}/test-runs`, { version: 2 })).status).toBe(202);
    expect((await http.post(`/api/agents/${agent.body.id}/test-runs`, { version: 1 })).status).toBe(404);
    // an archive: agents asks sessions to take the live deploy offline
    const deploy = (await http.post(`/api/agents/${agent.body.id}/deploys`, { external: true })).body;
    for (const status of ['building', 'live']) {
      await http.patch(`/api/agents/${agent.body.id}/deploys/${deploy.id}`, { status });
    }
    const archived = await http.delete(`/api/agents/${agent.body.id}`);
    expect(archived.status).toBe(200);
    expect(archived.body.stoppedDeploy).toMatchObject({ id: deploy.id, status: 'stopped' });
    expect((await http.get('/readyz')).body.services).toEqual({
      agents: 'up',
      sessions: 'up',
      playground: 'up',
      webhooks: 'up',
    });
  });

  it('lets the gateway keep used tickets in its JetStream bucket, and nothing else of JetStream', async () => {
    const gw = await tokenGateway(nats.url);
    try {
      // a stream's path (tickets open nothing else); the session does not exist: 404 once let in
      const ticket = await gw.ticket(EVENTS);
      expect(await gw.get(`${EVENTS}?ticket=${encodeURIComponent(ticket)}`)).toBe(404);
      expect(await gw.get(`${EVENTS}?ticket=${encodeURIComponent(ticket)}`)).toBe(401);
    } finally {
      await gw.close();
    }
    const js = await as('gateway');
    // another stream, or the bucket's deletion, is not the gateway's to ask for
    await expect(
      js.request('$JS.API.STREAM.CREATE.STOLEN', JSON.stringify({ name: 'STOLEN', subjects: ['x.>'] }), {
        timeout: 500,
      }),
    ).rejects.toThrow();
    await expect(
      js.request('$JS.API.STREAM.DELETE.KV_gateway-tickets', '', { timeout: 500 }),
    ).rejects.toThrow();
    // and no other service may write the gateway's used tickets
    const agents = await as('agents');
    await expect(agents.request('$KV.gateway-tickets.forged', '', { timeout: 500 })).rejects.toThrow();
  });

  it('keeps recordings: the playground stores one, the gateway serves it, retention removes it', async () => {
    const agent = (await http.post('/api/agents', { name: 'Recorded' })).body.id as string;
    const session = (await http.post(`/api/agents/${agent}/test-sessions`, { sessionType: 'voice' })).body
      .id as string;
    // as the playground does once a voice session ends: the file in the bucket, then the record
    const playground = await as('playground');
    const bucket = await new Objm(playground).open(RECORDINGS_BUCKET);
    const file = new Uint8Array(300_000).map((_, i) => i % 251);
    await bucket.putBlob({ name: recordingObject(agent, session) }, file);
    const recording = { durationMs: 1000, bytes: file.byteLength, startedAt: Date.now() };
    const reply = await playground.request(
      Subjects.testSessionsRecording,
      JSON.stringify({ agentId: agent, sessionId: session, recording }),
      { timeout: 2000 },
    );
    expect(reply.json<{ recording: unknown }>().recording).toEqual(recording);
    const path = `/api/agents/${agent}/test-sessions/${session}/recording`;
    const served = await fetch(stack.baseUrl + path, { headers: { range: 'bytes=200000-' } });
    expect(served.status).toBe(206);
    expect(Buffer.from(await served.arrayBuffer()).equals(Buffer.from(file.subarray(200_000)))).toBe(true);
    // the sessions service removes it with its session
    await stack.redis.zadd(`ss:{${agent}}:ts`, Date.now() - 8 * 24 * 3600 * 1000, session);
    expect(await stack.services.sessions.sessions!.retention.sweep()).toBeGreaterThanOrEqual(1);
    expect((await fetch(stack.baseUrl + path)).status).toBe(404);
    expect(await bucket.getBlob(recordingObject(agent, session))).toBeNull();
    // and no other service writes the bucket
    const agents = await as('agents');
    await expect(agents.request(`$O.${RECORDINGS_BUCKET}.M.forged`, '', { timeout: 500 })).rejects.toThrow();
  });

  it("keeps the callers' session slots: the playground may take and give them back, no one else may", async () => {
    const slots = new CallerSlots(
      await as('playground'),
      { quota: 1, leaseMs: 5000 },
      createLogger('t', 'silent'),
    );
    const slot = await slots.take('caller-x', 'r1');
    expect(slot).toBeTruthy();
    expect(await slots.take('caller-x', 'r2')).toBe(false);
    await (slot as { release(): Promise<void> }).release();
    expect(await slots.take('caller-x', 'r3')).toBeTruthy();
    const gateway = await as('gateway');
    await expect(
      gateway.request(`$KV.${CALLER_SLOTS_BUCKET}.forged.0`, '', { timeout: 500 }),
    ).rejects.toThrow();
  });

  it('refuses a wrong password', async () => {
    await expect(connect({ servers: nats.url, user: 'agents', pass: 'guess' })).rejects.toThrow();
  });

  it("a compromised service cannot impersonate another, publish requests it does not make, or read others' replies", async () => {
    const compromised = await as('agents');
    let stolen = 0;
    const denied: string[] = [];
    const count = (err: Error | null): void => {
      if (err) denied.push(err.message);
      else stolen++;
    };
    // impersonation: join the sessions queue group (denied: the real service keeps answering every request)
    compromised.subscribe('sessions.test-sessions.list', { queue: 'sessions', callback: count });
    // snooping: read the gateway's replies (denied)
    compromised.subscribe('_INBOX_gateway.>', { callback: count });
    await compromised.flush().catch(() => undefined);
    const agent = (await http.post('/api/agents', { name: 'Target' })).body.id as string;
    for (let i = 0; i < 20; i++) {
      const res = await http.get(`/api/agents/${agent}/test-sessions`);
      expect(res.status).toBe(200);
    }
    expect(stolen).toBe(0);
    expect(denied.join(' ')).toMatch(/permissions violation/i);
    // publishing a request to another service's subject is denied: nobody ever sees it
    await expect(
      compromised.request('sessions.deploys.create', JSON.stringify({ agentId: agent }), { timeout: 500 }),
    ).rejects.toThrow();
    expect((await http.get(`/api/agents/${agent}/deploys`)).body).toEqual([]);
    // nor may the gateway ask for what only the agents service asks: taking a live deploy offline
    const gw = await as('gateway');
    await expect(
      gw.request('sessions.deploys.stop', JSON.stringify({ agentId: agent, reason: 'x' }), { timeout: 500 }),
    ).rejects.toThrow();
  });

  it('the gateway may only request, never serve', async () => {
    const gw = await as('gateway');
    let served = 0;
    const denied: string[] = [];
    gw.subscribe('agents.get', {
      queue: 'agents',
      callback: (err) => {
        if (err) denied.push(err.message);
        else served++;
      },
    });
    await gw.flush().catch(() => undefined);
    const agent = (await http.post('/api/agents', { name: 'Served by agents' })).body.id as string;
    for (let i = 0; i < 10; i++) expect((await http.get(`/api/agents/${agent}`)).status).toBe(200);
    expect(served).toBe(0);
    expect(denied.join(' ')).toMatch(/permissions violation/i);
  });
});

describe('the cluster variant (deploy/nats-cluster.conf): the same users and permissions on 3 nodes', () => {
  it('serves every path across nodes and still refuses what a service may not do', async () => {
    const cluster = await startLocalNatsCluster({
      size: 3,
      configFile: join(import.meta.dirname, '..', '..', '..', 'deploy', 'nats-cluster.conf'),
      env: passwordEnv,
    });
    const [a, b, c] = cluster.nodes.map((n) => n.url);
    const spread = await startStack({
      natsUrl: a,
      natsUrls: { gateway: a, agents: b, sessions: c, playground: b },
      natsCredentials: credentials,
    });
    try {
      const h = api(spread.baseUrl);
      const agent = await h.post('/api/agents', { name: 'Clustered' });
      expect(agent.status).toBe(201);
      expect(
        (await h.post(`/api/agents/${agent.body.id}/test-sessions`, { sessionType: 'text' })).status,
      ).toBe(201);
      expect((await h.get('/readyz')).body.services).toEqual({
        agents: 'up',
        sessions: 'up',
        playground: 'up',
        webhooks: 'up',
      });
      // an impostor on another node still cannot serve the agents' subjects
      const impostor = await connect({ servers: c, user: 'gateway', pass: passwords.gateway });
      const denied: string[] = [];
      impostor.subscribe('agents.get', {
        queue: 'agents',
        callback: (err) => {
          if (err) denied.push(err.message);
        },
      });
      await impostor.flush().catch(() => undefined);
      for (let i = 0; i < 5; i++) expect((await h.get(`/api/agents/${agent.body.id}`)).status).toBe(200);
      expect(denied.join(' ')).toMatch(/permissions violation/i);
      await impostor.close();
      // a ticket is single-use across gateways on different nodes: made on one, used on another, refused on the first
      const [one, two] = [await tokenGateway(a!), await tokenGateway(c!)];
      try {
        const ticket = await one.ticket(EVENTS);
        expect(await two.get(`${EVENTS}?ticket=${encodeURIComponent(ticket)}`)).toBe(404);
        expect(await one.get(`${EVENTS}?ticket=${encodeURIComponent(ticket)}`)).toBe(401);
      } finally {
        await one.close();
        await two.close();
      }
    } finally {
      await spread.close();
      await cluster.dispose();
    }
  });
});
