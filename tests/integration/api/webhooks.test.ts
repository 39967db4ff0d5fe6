import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { domainEventSubject, type DomainEvent, type DomainEventType } from '@vab/contracts';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/** The verification snippet of docs/api.md, as a receiver would paste it. */
type Verify = (secret: string, header: string, rawBody: string, toleranceSeconds?: number) => boolean;
async function documentedVerify(): Promise<Verify> {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'api.md'), 'utf8');
  const at = doc.indexOf('<!-- webhook-verify-snippet -->');
  const code = /```js\n([\s\S]*?)```/.exec(doc.slice(at))?.[1];
  if (at < 0 || !code) throw new Error('docs/api.md has no verification snippet');
  const file = join(mkdtempSync(join(tmpdir(), 'vab-verify-')), 'verify.mjs');
  writeFileSync(file, code);
  return ((await import(file)) as { verifyWebhook: Verify }).verifyWebhook;
}

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver on loopback: answers each request with the next status of `plan` (then 200), records all. */
class Receiver {
  received: Received[] = [];
  plan: number[] = [];
  private server: Server | undefined;
  port = 0;

  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        this.received.push({ headers: req.headers, body });
        res.statusCode = this.plan.shift() ?? 200;
        res.end('ok');
      });
    });
    await new Promise<void>((r) => this.server!.listen(port, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url() {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => this.server?.close(() => r()) ?? r());
  }
}

let stack: Stack;
let http: ReturnType<typeof api>;
let nc: NatsConnection;
let verify: Verify;
const receivers: Receiver[] = [];
const receiver = async () => {
  const r = await new Receiver().start();
  receivers.push(r);
  return r;
};

beforeAll(async () => {
  stack = await startStack({
    // a name that resolves inside: its deliveries are refused at connect time
    resolve: async (host) =>
      host === 'inside.example'
        ? [{ address: '10.1.2.3', family: 4 }]
        : [{ address: '127.0.0.1', family: 4 }],
  });
  http = api(stack.baseUrl);
  nc = await connect({ servers: stack.natsUrl });
  verify = await documentedVerify();
});
afterAll(async () => {
  await nc?.close();
  for (const r of receivers) await r.stop();
  await stack?.close();
});

async function newAgent(): Promise<string> {
  const res = await http.post('/api/agents', { name: 'Hooked' });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

async function publish(agentId: string, type: DomainEventType, data: Record<string, unknown> = {}) {
  const event: DomainEvent = { id: randomUUID(), type, at: Date.now(), agentId, data };
  await jetstream(nc).publish(domainEventSubject(agentId, type), JSON.stringify(event), { msgID: event.id });
  return event;
}

async function register(agentId: string, url: string, events: string[] = ['call.ended']) {
  const res = await http.post(`/api/agents/${agentId}/webhooks`, { url, events });
  expect(res.status).toBe(201);
  return res.body as { id: string; secret: string };
}

const deliveries = async (agentId: string, webhookId: string) => {
  const res = await http.get(`/api/agents/${agentId}/webhooks/${webhookId}/deliveries`);
  expect(res.status).toBe(200);
  return res.body as {
    id: string;
    status: string;
    attempts: number;
    lastStatus?: number;
    lastError?: string;
  }[];
};

describe('webhook endpoints', () => {
  it('are created with a secret shown once, listed without it, updated and deleted', async () => {
    const agentId = await newAgent();
    const created = await register(agentId, 'https://crm.example.com/hook', ['call.ended', 'deploy.live']);
    expect(created.secret).toMatch(/^whsec_/);
    const listed = await http.get(`/api/agents/${agentId}/webhooks`);
    expect(listed.body).toHaveLength(1);
    expect(JSON.stringify(listed.body)).not.toContain(created.secret);
    expect(listed.body[0].secretHint).toBe(`…${created.secret.slice(-4)}`);
    const patched = await http.patch(`/api/agents/${agentId}/webhooks/${created.id}`, { enabled: false });
    expect(patched.body.enabled).toBe(false);
    // the secret is in nobody's store in the clear
    const stored = await stack.redis.hget(`wh:{${agentId}}:endpoints`, created.id);
    expect(stored).not.toContain(created.secret);
    expect((await http.delete(`/api/agents/${agentId}/webhooks/${created.id}`)).status).toBe(200);
    expect((await http.get(`/api/agents/${agentId}/webhooks/${created.id}`)).status).toBe(404);
  });

  it('refuse an unknown field, an unknown agent and an internal address', async () => {
    const agentId = await newAgent();
    const unknown = await http.post(`/api/agents/${agentId}/webhooks`, {
      url: 'https://a.example.com/',
      events: ['call.ended'],
      colour: 'red',
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toContain('colour');
    const nobody = await http.post('/api/agents/nobody/webhooks', {
      url: 'https://a.example.com/',
      events: ['call.ended'],
    });
    expect(nobody.status).toBe(404);
    for (const url of ['http://169.254.169.254/latest', 'http://10.0.0.1/', 'http://[::1]:8080/']) {
      const inside = await http.post(`/api/agents/${agentId}/webhooks`, { url, events: ['call.ended'] });
      expect(inside.status, url).toBe(400);
      expect(inside.body.message).toMatch(/WEBHOOK_EGRESS_ALLOW|FLOW_EGRESS_ALLOW|address/);
    }
  });
});

describe('deliveries', () => {
  it('retry a 500 until the 200, with one delivery id and signatures the documented snippet verifies', async () => {
    const agentId = await newAgent();
    const r = await receiver();
    r.plan = [500, 500];
    const hook = await register(agentId, r.url);
    const event = await publish(agentId, 'call.ended', { callId: 'call-1', endedReason: 'caller_hung_up' });
    await expect.poll(() => r.received.length, { timeout: 15_000 }).toBe(3);
    const ids = new Set(r.received.map((x) => x.headers['vab-delivery-id']));
    expect(ids.size).toBe(1);
    for (const got of r.received) {
      expect(JSON.parse(got.body)).toEqual(event);
      expect(got.headers['vab-event-type']).toBe('call.ended');
      expect(verify(hook.secret, String(got.headers['vab-signature']), got.body)).toBe(true);
      expect(verify('whsec_not-the-secret-at-all', String(got.headers['vab-signature']), got.body)).toBe(
        false,
      );
    }
    await expect
      .poll(async () => (await deliveries(agentId, hook.id))[0], { timeout: 5000 })
      .toMatchObject({ status: 'delivered', attempts: 3, lastStatus: 200 });
  });

  it('do not retry a 400, and go nowhere the egress policy refuses', async () => {
    const agentId = await newAgent();
    const r = await receiver();
    r.plan = [400];
    const hook = await register(agentId, r.url);
    const inside = await register(agentId, 'http://inside.example:9/hook');
    await publish(agentId, 'call.ended', { callId: 'c' });
    await expect
      .poll(async () => (await deliveries(agentId, hook.id))[0]?.status, { timeout: 10_000 })
      .toBe('failed');
    await expect
      .poll(async () => (await deliveries(agentId, inside.id))[0], { timeout: 10_000 })
      .toMatchObject({
        status: 'failed',
        attempts: 1,
        lastError: expect.stringContaining('refused by the egress policy'),
      });
    expect((await deliveries(agentId, hook.id))[0]).toMatchObject({ attempts: 1, lastStatus: 400 });
    // two retry delays of the test's schedule (200 ms, then 600 ms) pass: still one request
    await new Promise((res) => setTimeout(res, 1500));
    expect(r.received).toHaveLength(1);
    expect(stack.logs.some((l) => l.includes('WEBHOOK_EGRESS_REFUSED'))).toBe(true);
  });

  it('sign with both secrets during a rotation overlap, with the new one only after', async () => {
    const agentId = await newAgent();
    const r = await receiver();
    const hook = await register(agentId, r.url);
    const rotated = await http.post(`/api/agents/${agentId}/webhooks/${hook.id}/rotate`, {
      overlapSeconds: 3600,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).not.toBe(hook.secret);
    expect(rotated.body.previousSecretUntil).toBeGreaterThan(Date.now());
    await publish(agentId, 'call.ended', { callId: 'c1' });
    await expect.poll(() => r.received.length, { timeout: 10_000 }).toBe(1);
    const first = r.received[0]!;
    const sig = String(first.headers['vab-signature']);
    expect(sig.match(/v1=/g)).toHaveLength(2);
    expect(verify(hook.secret, sig, first.body)).toBe(true);
    expect(verify(rotated.body.secret, sig, first.body)).toBe(true);
    const again = await http.post(`/api/agents/${agentId}/webhooks/${hook.id}/rotate`, { overlapSeconds: 0 });
    await publish(agentId, 'call.ended', { callId: 'c2' });
    await expect.poll(() => r.received.length, { timeout: 10_000 }).toBe(2);
    const second = r.received[1]!;
    expect(verify(again.body.secret, String(second.headers['vab-signature']), second.body)).toBe(true);
    expect(verify(rotated.body.secret, String(second.headers['vab-signature']), second.body)).toBe(false);
  });

  it('survive the service being killed while the receiver is down, and arrive once it is back', async () => {
    const agentId = await newAgent();
    const r = await receiver();
    const port = r.port;
    const hook = await register(agentId, r.url);
    await r.stop();
    const events = [await publish(agentId, 'call.ended', { callId: 'k0' })];
    await expect
      .poll(async () => (await deliveries(agentId, hook.id))[0]?.attempts ?? 0, { timeout: 10_000 })
      .toBeGreaterThan(0);
    for (let i = 1; i < 5; i++) events.push(await publish(agentId, 'call.ended', { callId: `k${i}` }));
    // the endpoint failed: its deliveries go one at a time, oldest first; the others wait behind the first
    await expect
      .poll(
        async () =>
          (await deliveries(agentId, hook.id))
            .map((d) => `${d.status}/${d.attempts > 0 ? 'tried' : 'waiting'}`)
            .sort(),
        { timeout: 10_000 },
      )
      .toEqual(['pending/tried', ...Array<string>(4).fill('pending/waiting')]);
    await stack.services.webhooks.crash();
    // an event published while no instance runs waits in the stream
    events.push(await publish(agentId, 'call.ended', { callId: 'k5' }));
    const back = await new Receiver().start(port);
    receivers.push(back);
    await stack.services.webhooks.start();
    await expect
      .poll(() => new Set(back.received.map((x) => JSON.parse(x.body).id)).size, { timeout: 20_000 })
      .toBe(6);
    // every one, in the order of the events (a copy sent again by the killed instance comes later, if at all)
    expect([...new Set(back.received.map((x) => JSON.parse(x.body).id as string))]).toEqual(
      events.map((e) => e.id),
    );
    for (const got of back.received)
      expect(verify(hook.secret, String(got.headers['vab-signature']), got.body)).toBe(true);
  });

  it('are redelivered by hand with the same id, and cancelled when their call is erased', async () => {
    const agentId = await newAgent();
    const r = await receiver();
    const hook = await register(agentId, r.url);
    await publish(agentId, 'call.ended', { callId: 'again' });
    await expect.poll(() => r.received.length, { timeout: 10_000 }).toBe(1);
    const [delivered] = await deliveries(agentId, hook.id);
    const redo = await http.post(
      `/api/agents/${agentId}/webhooks/${hook.id}/deliveries/${delivered!.id}/redeliver`,
    );
    expect(redo.status).toBe(200);
    await expect.poll(() => r.received.length, { timeout: 10_000 }).toBe(2);
    expect(r.received[1]!.headers['vab-delivery-id']).toBe(delivered!.id);

    // a receiver that keeps failing: the call's erasure cancels what is pending
    r.plan = Array(100).fill(503);
    await publish(agentId, 'call.ended', { callId: 'erased' });
    await expect.poll(() => r.received.length, { timeout: 10_000 }).toBeGreaterThan(2);
    await publish(agentId, 'call.erased', { callId: 'erased' });
    await expect
      .poll(async () => (await deliveries(agentId, hook.id))[0]?.status, { timeout: 10_000 })
      .toBe('cancelled');
    const erased = (await deliveries(agentId, hook.id))[0]!;
    const refused = await http.post(
      `/api/agents/${agentId}/webhooks/${hook.id}/deliveries/${erased.id}/redeliver`,
    );
    expect(refused.status).toBe(409);
  });

  it('report an endpoint that keeps failing to the agent’s other endpoints, and clear it once delivered', async () => {
    const agentId = await newAgent();
    const bad = await receiver();
    bad.plan = Array(5).fill(500);
    const watcher = await receiver();
    const hook = await register(agentId, bad.url);
    await register(agentId, watcher.url, ['webhook.failing']);
    await publish(agentId, 'call.ended', { callId: 'f' });
    await expect
      .poll(async () => (await http.get(`/api/agents/${agentId}/webhooks/${hook.id}`)).body.failing, {
        timeout: 15_000,
      })
      .toMatchObject({ consecutiveFailures: 5, lastError: 'answered 500' });
    await expect.poll(() => watcher.received.length, { timeout: 10_000 }).toBe(1);
    expect(JSON.parse(watcher.received[0]!.body)).toMatchObject({
      type: 'webhook.failing',
      data: { webhookId: hook.id, lastError: 'answered 500' },
    });
    expect(stack.logs.some((l) => l.includes('WEBHOOK_ENDPOINT_FAILING'))).toBe(true);
    // the sixth attempt is answered 200: the report goes
    await expect
      .poll(async () => (await http.get(`/api/agents/${agentId}/webhooks/${hook.id}`)).body.failing, {
        timeout: 15_000,
      })
      .toBeUndefined();
  });
});
