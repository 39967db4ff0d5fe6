#!/usr/bin/env node
// Webhook deliveries (issue 47's numbers): (1) from an event published to DOMAIN_EVENTS to its delivery
// reaching a receiver that is up, p50 / p90 / p99; (2) a backlog of deliveries to a dead receiver: what it
// costs (Redis memory, this process's RSS — the webhooks service runs in it — and the stream's bytes), and,
// once the receiver is back, how long until every one arrived and how many arrived in the order their
// events were published. The agents and webhooks services run in this process from their builds, on a NATS
// and a Redis of their own.
// Usage: npm run build && node --expose-gc bench/webhooks.mjs [--events 1000] [--backlog 10000]
import { createServer } from 'node:http';
import { TextDecoder } from 'node:util';
import { randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { startAgentsService } from '@vab/agents';
import { connectNats } from '@vab/bus';
import { createLogger } from '@vab/service-kit';
import { createRedis } from '@vab/storage';
import { startLocalNats, startLocalRedis } from '@vab/testkit';
import { loadConfig, startWebhooksService, webhooksSettingsFrom } from '@vab/webhooks';
import { option } from './processes.mjs';
import { sleep } from './lib/figures.mjs';

const EVENTS = option('events', 1000);
const BACKLOG = option('backlog', 10_000);
const pct = (xs, q) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(q * xs.length) - 1)];
const mb = (bytes) => (bytes / 1024 / 1024).toFixed(1);
// after a collection: what stays (the heap), and the process's resident set (which seldom shrinks)
const memory = () => (globalThis.gc?.(), process.memoryUsage());

const nats = await startLocalNats();
const redisServer = await startLocalRedis();
const log = createLogger('bench', 'silent');
const connections = [];
const redisOf = () => {
  const r = createRedis({ url: redisServer.url }, log, { name: 'bench' });
  connections.push(() => r.quit());
  return r;
};
const ncOf = async (service) => {
  const nc = await connectNats({ url: nats.url, name: service, service }, log);
  connections.push(() => nc.drain());
  return nc;
};
const agents = startAgentsService({ nc: await ncOf('agents'), redis: redisOf(), log });
await agents.ready;
const webhooks = startWebhooksService({
  nc: await ncOf('webhooks'),
  redis: redisOf(),
  log,
  settings: {
    // the service's own defaults (as it runs in production), with receivers on loopback allowed
    ...webhooksSettingsFrom(
      loadConfig({ WEBHOOK_SECRETS_KEY: '03'.repeat(32), WEBHOOK_EGRESS_ALLOW: '127.0.0.1' }),
    ),
    timeoutMs: 5000,
    // the backlog's receiver comes back within seconds: the delays stay short enough to see it recover
    retry: { firstMs: 1000, maxDelayMs: 5000, forMs: 3_600_000 },
    retentionDays: 1,
    stream: { maxAgeMs: 3_600_000, replicas: 1 },
  },
});
await webhooks.ready;

const client = await ncOf('bench');
const ask = async (subject, body) => {
  const reply = await client.request(subject, JSON.stringify(body), { timeout: 5000 });
  return JSON.parse(new TextDecoder().decode(reply.data));
};
const js = jetstream(client);
const jsm = await jetstreamManager(client);
const publish = async (agentId, n) => {
  const event = { id: randomUUID(), type: 'call.ended', at: Date.now(), agentId, data: { n } };
  await js.publish(`domain.${agentId}.call.ended`, JSON.stringify(event), { msgID: event.id });
};

/** A receiver: the arrival time of each event's first copy, and the order events arrived in. */
function receiver(port = 0) {
  const first = new Map();
  const order = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const event = JSON.parse(body);
      if (!first.has(event.id)) {
        first.set(event.id, Date.now() - event.at);
        order.push(event.data.n);
      }
      res.end('ok');
    });
  });
  return new Promise((resolve) =>
    server.listen(port, '127.0.0.1', () =>
      resolve({ first, order, port: server.address().port, close: () => server.close() }),
    ),
  );
}

async function endpoint(url) {
  const agent = await ask('agents.create', { name: 'Bench' });
  await ask('webhooks.endpoints.create', {
    agentId: agent.id,
    body: { url, events: ['call.ended'], enabled: true },
  });
  return agent.id;
}

// (1) latency, receiver up
const up = await receiver();
const live = await endpoint(`http://127.0.0.1:${up.port}/hook`);
for (let i = 0; i < EVENTS; i++) await publish(live, i);
while (up.first.size < EVENTS) await sleep(50);
const latencies = [...up.first.values()];
up.close();

// (2) backlog to a dead receiver
const dead = await receiver();
const port = dead.port;
dead.close();
const deadAgent = await endpoint(`http://127.0.0.1:${port}/hook`);
const memBefore = Number(/used_memory:(\d+)/.exec(await redisOf().info('memory'))[1]);
const processBefore = memory();
const streamBefore = (await jsm.streams.info('DOMAIN_EVENTS')).state.bytes;
const t0 = Date.now();
for (let i = 0; i < BACKLOG; i++) await publish(deadAgent, i);
// every event read into its delivery, and each delivery attempted at least once
const redis = redisOf();
for (;;) {
  const c = await jsm.consumers.info('DOMAIN_EVENTS', 'webhooks-fanout');
  if (c.num_pending === 0 && c.num_ack_pending === 0 && (await redis.zcard('wh:{due}')) >= BACKLOG) break;
  await sleep(200);
}
await sleep(3000);
const memAfter = Number(/used_memory:(\d+)/.exec(await redis.info('memory'))[1]);
const processAfter = memory();
const streamAfter = (await jsm.streams.info('DOMAIN_EVENTS')).state.bytes;
const back = await receiver(port);
const t1 = Date.now();
while (back.first.size < BACKLOG) await sleep(100);
const recovered = Date.now() - t1;
let inOrder = 0;
for (let i = 1; i < back.order.length; i++) if (back.order[i] > back.order[i - 1]) inOrder++;
back.close();

console.log(`webhook deliveries (${EVENTS} events to a receiver that is up; ${BACKLOG} to a dead one)\n`);
console.log('| measure | value |');
console.log('| --- | --- |');
console.log(
  `| event → delivered p50 / p90 / p99 (ms) | ${pct(latencies, 0.5)} / ${pct(latencies, 0.9)} / ${pct(latencies, 0.99)} |`,
);
console.log(`| backlog | ${BACKLOG} |`);
console.log(`| backlog: published in (s) | ${((Date.now() - t0 - recovered) / 1000).toFixed(1)} |`);
console.log(`| backlog: Redis memory added (MB) | ${mb(memAfter - memBefore)} |`);
console.log(
  `| backlog: this process's heap / RSS added (MB; the webhooks and agents services, the publisher) | ` +
    `${mb(processAfter.heapUsed - processBefore.heapUsed)} / ${mb(processAfter.rss - processBefore.rss)} |`,
);
console.log(`| backlog: DOMAIN_EVENTS bytes added (MB) | ${mb(streamAfter - streamBefore)} |`);
console.log(`| receiver back → all ${BACKLOG} delivered (s) | ${(recovered / 1000).toFixed(1)} |`);
console.log(
  `| arrived after the one published before them | ${((100 * inOrder) / Math.max(1, back.order.length - 1)).toFixed(1)} % |`,
);

await webhooks.stop(2000);
await agents.stop(2000);
for (const close of connections.reverse()) await close().catch(() => undefined);
await nats.dispose();
await redisServer.dispose();
process.exit(0);
