import { connect, type NatsConnection, type SubscriptionOptions } from '@nats-io/transport-node';
import { AppError, Headers } from '@vab/contracts';
import { countSocketWrites, lineSink, startNats, type DisposableServer } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient, busClientOf } from './client.js';
import { connectNats } from './connect.js';
import { pino } from 'pino';
import { serve, type HandlerTable } from './server.js';

let nc: NatsConnection;
let nats: DisposableServer;
const lines: string[] = [];
const log = pino({ level: 'debug' }, lineSink(lines));

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
});
afterAll(async () => {
  await nc.close();
  await nats.dispose();
});

/** A service with just the subjects a test needs; the rest answer INTERNAL if ever called. */
function partialTable(handlers: Partial<HandlerTable<'agents'>>): HandlerTable<'agents'> {
  return handlers as HandlerTable<'agents'>;
}

/** An agents service on `conn` that answers `agents.lookup`: every id exists. */
const servedLookup = (conn: NatsConnection) =>
  serve(conn, {
    service: 'agents',
    log,
    handlers: partialTable({
      'agents.lookup': async (req) => ({ id: req.id, exists: true, archived: false }),
    }),
  });

describe('serve + BusClient', () => {
  it('answers an unexpected error as INTERNAL without detail, with the micro error headers, and logs it', async () => {
    const served = serve(nc, {
      service: 'agents',
      log,
      handlers: partialTable({
        'agents.lookup': async () => {
          throw new Error('secret database detail');
        },
      }),
    });
    try {
      const raw = await nc.request('agents.lookup', JSON.stringify({ id: 'abc' }), { timeout: 2000 });
      expect(raw.headers?.get(Headers.serviceErrorCode)).toBe('500');
      expect(raw.headers?.get(Headers.serviceError)).toBe('internal error');
      expect(raw.json()).toEqual({ code: 'INTERNAL', message: 'internal error' });
      expect(lines.some((l) => l.includes('secret database detail') && l.includes('unhandled error'))).toBe(
        true,
      );
    } finally {
      await served.stop(1000);
    }
  });

  it('re-validates what arrives on the bus and passes AppErrors through with their code', async () => {
    const served = serve(nc, {
      service: 'agents',
      log,
      handlers: partialTable({
        'agents.lookup': async (req) => {
          if (req.id === 'gone') throw new AppError('NOT_FOUND', 'agent gone not found');
          if (req.id === 'full')
            throw new AppError('CAPACITY_EXHAUSTED', 'the deploy is full', {
              retryAfterSeconds: 5,
              capacity: 'deploy',
            });
          return { id: req.id, exists: true, archived: false };
        },
      }),
    });
    const bus = new BusClient(nc);
    const opts = { timeoutMs: 2000, requestId: 'r1' };
    try {
      // everything the error says of itself crosses: a service that passes it on (the playground, for the
      // sessions' admission) gives the gateway the same status (a deploy's cap: 429, not the server's 503)
      const full = await bus.request('agents.lookup', { id: 'full' }, opts).catch((e: unknown) => e);
      expect(full).toBeInstanceOf(AppError);
      expect((full as AppError).toBody()).toEqual({
        code: 'CAPACITY_EXHAUSTED',
        message: 'the deploy is full',
        retryAfterSeconds: 5,
        capacity: 'deploy',
      });
      await expect(bus.request('agents.lookup', { id: 'ok' }, opts)).resolves.toMatchObject({ exists: true });
      await expect(bus.request('agents.lookup', { id: 'gone' }, opts)).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      await expect(bus.request('agents.lookup', { id: 'bad id!' }, opts)).rejects.toMatchObject({
        code: 'VALIDATION_FAILED',
        issues: [{ path: 'id', message: expect.any(String) }],
      });
      const notJson = await nc.request('agents.lookup', '{nope', { timeout: 2000 });
      expect(notJson.json()).toMatchObject({ code: 'INVALID_JSON' });
    } finally {
      await served.stop(1000);
    }
  });

  it('sends a header block only with a reply that has headers', async () => {
    const served = serve(nc, {
      service: 'agents',
      log,
      handlers: partialTable({
        'agents.lookup': async (req, ctx) => {
          if (req.id === 'tagged') ctx.setHeader(Headers.etag, '"7"');
          return { id: req.id, exists: true, archived: false };
        },
      }),
    });
    try {
      const plain = await nc.request('agents.lookup', JSON.stringify({ id: 'plain' }), { timeout: 2000 });
      expect(plain.headers).toBeUndefined();
      expect(plain.json()).toEqual({ id: 'plain', exists: true, archived: false });
      const tagged = await nc.request('agents.lookup', JSON.stringify({ id: 'tagged' }), { timeout: 2000 });
      expect(tagged.headers?.get(Headers.etag)).toBe('"7"');
      const viaClient = await new BusClient(nc).requestRaw(
        'agents.lookup',
        { id: 'plain' },
        { timeoutMs: 2000, requestId: 'r2' },
      );
      expect(viaClient.headers).toBeUndefined();
    } finally {
      await served.stop(1000);
    }
  });

  it('maps no responders to SERVICE_UNAVAILABLE', async () => {
    const bus = new BusClient(nc);
    await expect(
      bus.request('sessions.test-sessions.list', { agentId: 'x' }, { timeoutMs: 1000, requestId: 'r' }),
    ).rejects.toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
    });
  });

  it('stop() lets in-flight requests finish before returning', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const served = serve(nc, {
      service: 'agents',
      log,
      handlers: partialTable({
        'agents.lookup': async (req) => {
          await gate;
          return { id: req.id, exists: false, archived: false };
        },
      }),
    });
    const bus = new BusClient(nc);
    const pending = bus.request('agents.lookup', { id: 'slow' }, { timeoutMs: 3000, requestId: 'r' });
    await expect.poll(() => served.inFlight()).toBe(1);
    const stopped = served.stop(2000);
    release();
    await stopped;
    await expect(pending).resolves.toMatchObject({ id: 'slow', exists: false });
  });

  it('stop() takes at most its bound, a stuck drain and a stuck handler together', async () => {
    // a connection whose drains never finish (as on a connection that went away mid-stop)
    const stuckDrains = new Proxy(nc, {
      get(target, prop, receiver) {
        if (prop !== 'subscribe') return Reflect.get(target, prop, receiver) as unknown;
        return (subject: string, opts: SubscriptionOptions) => {
          const sub = target.subscribe(subject, opts);
          return new Proxy(sub, {
            get: (s, p) =>
              p === 'drain'
                ? () => (sub.unsubscribe(), new Promise(() => undefined))
                : (Reflect.get(s, p) as unknown),
          });
        };
      },
    });
    const served = serve(stuckDrains, {
      service: 'agents',
      log,
      handlers: partialTable({ 'agents.lookup': () => new Promise(() => undefined) }),
    });
    await served.ready;
    void nc
      .request('agents.lookup', JSON.stringify({ id: 'stuck' }), { timeout: 3000 })
      .catch(() => undefined);
    await expect.poll(() => served.inFlight()).toBe(1);
    const started = performance.now();
    await served.stop(300);
    // before the fix the drain's wait and the in-flight wait each took the bound: ~600 ms
    expect(performance.now() - started).toBeLessThan(450);
  });

  it('resume answers once the server has the subscription, and does not wait out a server that is gone', async () => {
    const own = await startNats();
    const conn = await connect({ servers: own.url, reconnectTimeWait: 60_000 });
    const served = servedLookup(conn);
    try {
      await served.ready;
      served.pause('agents.lookup');
      await served.resume('agents.lookup');
      // asked from another connection right after: the subscription is there
      const asker = await connect({ servers: own.url });
      await expect(asker.request('agents.lookup', JSON.stringify({ id: 'x' }))).resolves.toBeDefined();
      await asker.close();
      served.pause('agents.lookup');
      await own.dispose();
      // a flush to a server that is gone would wait for the reconnect, a minute away
      await expect(served.resume('agents.lookup')).resolves.toBeUndefined();
    } finally {
      await served.stop(0);
      await conn.close();
    }
  });

  it('resume on a connection that is draining neither throws nor rejects (a session stopping in a shutdown)', async () => {
    const conn = await connect({ servers: nats.url });
    const served = servedLookup(conn);
    await served.ready;
    served.pause('agents.lookup');
    const draining = conn.drain();
    await expect(served.resume('agents.lookup')).resolves.toBeUndefined();
    await draining;
  });

  it('reports and stops itself when a subscription closes under it (not by pause or stop)', async () => {
    const own = await connect({ servers: nats.url });
    const served = servedLookup(own);
    await served.ready;
    served.pause('agents.lookup'); // a pause is no close to report
    void served.resume('agents.lookup');
    await own.close();
    await expect(served.closed).resolves.toBeInstanceOf(Error);
    expect(lines.some((l) => l.includes('SUBSCRIPTION_CLOSED') && l.includes('agents.lookup'))).toBe(true);
  });
});

describe('BusClient.request', () => {
  it("parses the reply with the subject's response schema and names a reply that breaks it", async () => {
    const wrong = nc.subscribe('agents.lookup', {
      callback: (_err, msg) => {
        msg.respond(JSON.stringify({ id: 'a', exists: 'yes' }));
      },
    });
    try {
      await expect(
        busClientOf(nc).request('agents.lookup', { id: 'a' }, { timeoutMs: 2000, requestId: 'r' }),
      ).rejects.toMatchObject({
        code: 'INTERNAL',
        message: 'the reply to agents.lookup does not match its contract',
      });
    } finally {
      wrong.unsubscribe();
    }
  });

  it('is one client per connection', () => {
    expect(busClientOf(nc)).toBe(busClientOf(nc));
  });
});

describe('BusClient replies', () => {
  it('times out a slow service as TIMEOUT, ignores its late reply, and keeps serving others', async () => {
    const slow = nc.subscribe('agents.lookup', {
      callback: (_err, msg) => {
        setTimeout(() => msg.respond(JSON.stringify({ id: 'late', exists: true, archived: false })), 300);
      },
    });
    const bus = new BusClient(nc);
    try {
      await expect(
        bus.request('agents.lookup', { id: 'a' }, { timeoutMs: 100, requestId: 'r' }),
      ).rejects.toMatchObject({ code: 'TIMEOUT' });
    } finally {
      slow.unsubscribe();
    }
    const fast = nc.subscribe('agents.lookup', {
      callback: (_err, msg) => {
        const { id } = msg.json<{ id: string }>();
        msg.respond(JSON.stringify({ id, exists: true, archived: false }));
      },
    });
    try {
      // the sleep is the test: the slow reply (300 ms) must arrive in between, for nobody
      await new Promise((r) => setTimeout(r, 350));
      const answers = await Promise.all(
        ['b', 'c', 'd'].map((id) =>
          bus.request('agents.lookup', { id }, { timeoutMs: 2000, requestId: 'r' }),
        ),
      );
      expect(answers.map((a) => a.id)).toEqual(['b', 'c', 'd']);
    } finally {
      fast.unsubscribe();
    }
  });

  it('fails pending requests as unavailable when the connection closes', async () => {
    const own = await connect({ servers: nats.url });
    const silent = nc.subscribe('agents.lookup', { callback: () => undefined });
    await nc.flush();
    const bus = new BusClient(own);
    const pending = bus.request('agents.lookup', { id: 'x' }, { timeoutMs: 5000, requestId: 'r' });
    await own.flush(); // the request has reached the server
    await own.close();
    await expect(pending).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
    silent.unsubscribe();
  });
});

describe('coalesced socket writes', () => {
  it('still finds the nats.js internals it patches (a nats.js upgrade that moves them must fail here)', async () => {
    const own = await connectNats({ url: nats.url, name: 'internals', service: 'test' }, log);
    try {
      const transport = (own as unknown as { protocol?: { transport?: Record<string | symbol, unknown> } })
        .protocol?.transport;
      const proto = transport ? (Object.getPrototypeOf(transport) as Record<string | symbol, unknown>) : {};
      const found = {
        transport: transport !== undefined,
        socket: transport !== undefined && 'socket' in transport,
        _send: typeof proto._send === 'function',
        patched: proto[Symbol.for('vab.nats.coalesced-writes')] === true,
      };
      expect(
        found,
        'nats.js internals changed: coalesceWrites in connect.ts no longer applies; re-measure it (bench/ab.mjs) and adapt or drop it',
      ).toEqual({ transport: true, socket: true, _send: true, patched: true });
      expect(lines.join('\n')).not.toContain('nats transport internals not as expected');
    } finally {
      await own.close();
    }
  });

  it('sends what one turn of the event loop publishes in one write, and loses nothing on drain', async () => {
    const received: string[] = [];
    const sub = nc.subscribe('coalesce.test', { callback: (_e, m) => void received.push(m.string()) });
    await nc.flush();
    const pub = await connectNats({ url: nats.url, name: 'pub', service: 'test' }, log);
    const writes = countSocketWrites(
      (pub as unknown as { protocol: { transport: { socket: object } } }).protocol.transport.socket,
    );
    // each publish in its own microtask: without coalescing, nats.js flushes (one write) after each
    for (let i = 0; i < 50; i++) {
      pub.publish('coalesce.test', String(i));
      await Promise.resolve();
    }
    await new Promise((r) => setImmediate(r));
    expect(writes()).toBe(1);
    for (let i = 50; i < 100; i++) pub.publish('coalesce.test', String(i));
    await pub.drain();
    await expect.poll(() => received.length).toBe(100);
    sub.unsubscribe();
    expect(received).toEqual(Array.from({ length: 100 }, (_, i) => String(i)));
  });
});
