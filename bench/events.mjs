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
import { TextDecoder } from 'node:util';
import { connectNats } from '@vab/bus';
import { liveSubject } from '@vab/contracts';
import { ensureEventsStream, SessionEvents } from '@vab/playground';
import { freePort, startLocalNats, startLocalRedis } from '@vab/testkit';
import WebSocket from 'ws';
import { pino } from 'pino';
import { Agent, fetch as undiciFetch } from 'undici';
import { option, sendJson, startCore } from './processes.mjs';
import { root as here, sleep } from './lib/figures.mjs';

const CLIENTS = option('clients', 1000);
const EVENTS = option('events', 1000);
const RATE = option('rate', 200);
const CHURN_SECONDS = option('churn-seconds', 60);

const log = pino({ level: 'silent' });
const nats = await startLocalNats();
const redis = await startLocalRedis();
const env = { NATS_URL: nats.url, REDIS_URL: redis.url };
// the gateway's heap is read through its inspector: a garbage collection, then the live heap
const inspectPort = await freePort();
const core = await startCore(here, env, {
  SSE_MAX_STREAMS_PER_CLIENT: String(CLIENTS * 2),
  SSE_HEARTBEAT_MS: '15000',
  NODE_OPTIONS: `--inspect=127.0.0.1:${inspectPort}`,
});
const [{ webSocketDebuggerUrl }] = await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json();
const inspector = new WebSocket(webSocketDebuggerUrl);
await new Promise((resolve) => inspector.once('open', resolve));
let inspectorCalls = 0;
const inspect = (method) =>
  new Promise((resolve) => {
    const id = ++inspectorCalls;
    const onMessage = (data) => {
      const msg = JSON.parse(String(data));
      if (msg.id !== id) return;
      inspector.off('message', onMessage);
      resolve(msg.result);
    };
    inspector.on('message', onMessage);
    inspector.send(JSON.stringify({ id, method }));
  });
/** The gateway's live heap after a full collection, MB. */
const heapMb = async () => {
  await inspect('HeapProfiler.collectGarbage');
  return (await inspect('Runtime.getHeapUsage')).usedSize / 1024 / 1024;
};
const nc = await connectNats({ url: nats.url, name: 'bench', service: 'playground' }, log);
await ensureEventsStream(
  nc,
  {
    EVENTS_MAX_AGE_MS: 3_600_000,
    EVENTS_MAX_BYTES: 1 << 30,
    EVENTS_REPLICAS: 1,
    EVENTS_SETUP_TIMEOUT_MS: 10_000,
  },
  log,
);
const agent = await sendJson('POST', `${core.url}/api/agents`, { name: 'Events bench' });
const session = await sendJson('POST', `${core.url}/api/agents/${agent.id}/test-sessions`, {
  sessionType: 'text',
});
const events = new SessionEvents(nc, agent.id, session.id, log);
// this process stands in for the instance running the session: streams ask it whether the session still runs
nc.subscribe(liveSubject(session.id), { callback: (_e, msg) => void msg.respond() });
await nc.flush();
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
  const ac = new globalThis.AbortController();
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
  })().catch(() => last); // a client closed before its answer came
  return { close: () => ac.abort(), done, last: () => last };
}

const pct = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(q * s.length) - 1)] ?? NaN;
};
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

async function publish(n, rate) {
  for (let i = 0; i < n; i++) {
    emit();
    await sleep(1000 / rate);
  }
  await nc.flush();
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
const heapBefore = await heapMb();
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
const heapAfter = await heapMb();
console.log(
  `| ${CLIENTS} clients open | gateway RSS ${before.toFixed(1)} → ${after.toFixed(1)} MB, live heap ` +
    `${heapBefore.toFixed(1)} → ${heapAfter.toFixed(1)} MB | ${(((heapAfter - heapBefore) * 1024) / CLIENTS).toFixed(1)} KB heap, ` +
    `${(((after - before) * 1024) / CLIENTS).toFixed(1)} KB RSS per client |`,
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
  if ((Date.now() - churnStart) % 10_000 < 1000) {
    samples.push(`${(await heapMb()).toFixed(1)}/${rssMb(gatewayPid).toFixed(0)}`);
  }
  await sleep(1000);
}
console.log(
  `| churn ${CHURN_SECONDS} s | ${reconnects} reconnects with Last-Event-ID | gateway live heap / RSS every 10 s (MB): ${samples.join(', ')} |`,
);

for (const c of clients) c.close();
inspector.close();
await dispatcher.close().catch(() => undefined);
await nc.close();
for (const p of core.procs) p.kill('SIGTERM');
await nats.dispose();
await redis.dispose();
process.exit(0);
