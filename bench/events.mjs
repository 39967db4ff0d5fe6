#!/usr/bin/env node
// Session events to SSE clients: how fast an event reaches a client through the gateway (JetStream → ordered
// consumer → HTTP), with one client and with many, and what the gateway holds per open stream.
// Events are published exactly as the playground publishes them (its SessionEvents, into the stream its
// ensureEventsStream makes) for one recorded test session; clients read
// GET /api/agents/:id/test-sessions/:sessionId/events from a gateway process.
// 1. latency, 1 client: --events events at --rate per second; p50/p99 from publish to the client's read.
// 2. --clients streams open on one gateway: its RSS before and after (per client), latency to all of them.
// 3. churn for --churn-seconds: every second a tenth of the clients leave and come back with Last-Event-ID while
//    events flow; the gateway's RSS sampled (flat = no growth per reconnect).
// Usage: npm run build && node bench/events.mjs [--clients 1000] [--events 1000] [--rate 200] [--churn-seconds 60]
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstream } from '@nats-io/jetstream';
import { connectNats } from '@vab/bus';
import { ensureEventsStream, SessionEvents } from '@vab/playground';
import { startLocalNats, startLocalRedis } from '@vab/testkit';
import { pino } from 'pino';
import { Agent, fetch as undiciFetch } from 'undici';
import { option, sendJson, startCore } from './processes.mjs';

const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLIENTS = option('clients', 1000);
const EVENTS = option('events', 1000);
const RATE = option('rate', 200);
const CHURN_SECONDS = option('churn-seconds', 60);

const log = pino({ level: 'silent' });
const nats = await startLocalNats();
const redis = await startLocalRedis();
const env = { NATS_URL: nats.url, REDIS_URL: redis.url };
const core = await startCore(here, env, {
  SSE_MAX_STREAMS_PER_CLIENT: String(CLIENTS * 2),
  SSE_HEARTBEAT_MS: '15000',
  LOG_LEVEL: 'warn',
});
const nc = await connectNats({ url: nats.url, name: 'bench', service: 'playground' }, log);
await ensureEventsStream(
  nc,
  {
    EVENTS_MAX_AGE_MS: 3_600_000,
    EVENTS_MAX_BYTES: 1 << 30,
    EVENTS_REPLICAS: 1,
    EVENTS_MAX_IN_FLIGHT: 10_000,
    EVENTS_SETUP_TIMEOUT_MS: 10_000,
  },
  log,
);
const agent = await sendJson('POST', `${core.url}/api/agents`, { name: 'Events bench' });
const session = await sendJson('POST', `${core.url}/api/agents/${agent.id}/test-sessions`, {
  sessionType: 'text',
});
const events = new SessionEvents(jetstream(nc), agent.id, session.id, log, 10_000);
const url = `${core.url}/api/agents/${agent.id}/test-sessions/${session.id}/events`;
// one connection per stream, as browsers would have
const dispatcher = new Agent({ connections: CLIENTS * 2, pipelining: 0, bodyTimeout: 0, headersTimeout: 0 });

/** When each event id was published (ms, this process's clock). */
const publishedAt = new Map();
const emit = () => {
  events.emit({ type: 'user_turn', text: 'hello', final: true, stepId: 'start' });
  publishedAt.set(events.lastId, performance.now());
};

/** An SSE reader: calls `onEvent(id, receivedAt)` per event; `close()` cuts it; resolves its last id. */
function client(lastEventId, onEvent) {
  const ac = new AbortController();
  let last = lastEventId;
  const done = (async () => {
    const res = await undiciFetch(url, {
      dispatcher,
      signal: ac.signal,
      headers: lastEventId ? { 'last-event-id': String(lastEventId) } : {},
    });
    if (res.status !== 200) throw new Error(`events answered ${res.status}`);
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const m = /^id: (\d+)$/m.exec(block);
          if (m) {
            last = Number(m[1]);
            onEvent(last, performance.now());
          }
        }
      }
    } catch {
      // cut by close()
    }
    return last;
  })();
  return { close: () => ac.abort(), done, last: () => last };
}

const pct = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(q * s.length) - 1)] ?? NaN;
};
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function publish(n, rate) {
  for (let i = 0; i < n; i++) {
    emit();
    await sleep(1000 / rate);
  }
  await events.flush();
}

// 1. one client
{
  const latencies = [];
  const c = client(0, (id, at) => {
    const sent = publishedAt.get(id);
    if (sent !== undefined) latencies.push(at - sent);
  });
  await sleep(300);
  await publish(EVENTS, RATE);
  await sleep(500);
  c.close();
  console.log(
    `| 1 client | ${latencies.length} events at ${RATE}/s | p50 ${pct(latencies, 0.5).toFixed(2)} ms | p99 ${pct(latencies, 0.99).toFixed(2)} ms |`,
  );
}

// 2. many clients
const gatewayPid = core.gateway.pid;
await sleep(1000);
const before = rssMb(gatewayPid);
const fanout = [];
const clients = [];
const startFrom = events.lastId;
for (let i = 0; i < CLIENTS; i++) {
  clients.push(
    client(startFrom, (id, at) => {
      const sent = publishedAt.get(id);
      if (sent !== undefined && id > startFrom) fanout.push(at - sent);
    }),
  );
  if (i % 100 === 99) await sleep(50);
}
await sleep(3000);
const after = rssMb(gatewayPid);
console.log(
  `| ${CLIENTS} clients open | gateway RSS ${before.toFixed(1)} → ${after.toFixed(1)} MB | ${(((after - before) * 1024) / CLIENTS).toFixed(1)} KB per client |`,
);
await publish(Math.min(EVENTS, 200), 20);
await sleep(2000);
console.log(
  `| ${CLIENTS} clients, fan-out | ${fanout.length} deliveries | p50 ${pct(fanout, 0.5).toFixed(2)} ms | p99 ${pct(fanout, 0.99).toFixed(2)} ms |`,
);

// 3. churn
const samples = [];
const churnStart = Date.now();
let reconnects = 0;
let i = 0;
while (Date.now() - churnStart < CHURN_SECONDS * 1000) {
  emit();
  emit();
  for (let k = 0; k < CLIENTS / 10; k++) {
    const at = i++ % CLIENTS;
    const old = clients[at];
    old.close();
    clients[at] = client(old.last(), () => undefined);
    reconnects++;
  }
  if ((Date.now() - churnStart) % 10_000 < 1000) samples.push(rssMb(gatewayPid).toFixed(1));
  await sleep(1000);
}
console.log(
  `| churn ${CHURN_SECONDS} s | ${reconnects} reconnects with Last-Event-ID | gateway RSS samples (MB): ${samples.join(', ')} |`,
);

for (const c of clients) c.close();
await dispatcher.close().catch(() => undefined);
await nc.close();
for (const p of core.procs) p.kill('SIGTERM');
await nats.dispose();
await redis.dispose();
process.exit(0);
