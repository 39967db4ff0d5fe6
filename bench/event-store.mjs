#!/usr/bin/env node
// The two engines the issue named for keeping session events, on the same machine and the same events:
//   jetstream: the playground publishes to a JetStream stream; a reader follows one session's subject with an
//              ordered consumer (what the gateway does per SSE client) — what we built.
//   redis:     the playground asks the sessions service over NATS to store the event (it may not touch another
//              service's keys), which XADDs it to a per-session Redis Stream; a reader follows it with
//              XREAD BLOCK (what a gateway would have to ask the sessions service to do for it).
// Each: --events events at --rate per second; p50/p99 from publish to read; publisher-side CPU per event.
// Usage: npm run build && node bench/event-store.mjs [--events 2000] [--rate 500]
import { DeliverPolicy, jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { startLocalNats, startLocalRedis } from '@vab/testkit';
import { Redis } from 'ioredis';
import { option } from './processes.mjs';
import { sleep } from './lib/figures.mjs';

const EVENTS = option('events', 2000);
const RATE = option('rate', 500);
const nats = await startLocalNats();
const redis = await startLocalRedis();
const pct = (xs, q) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(q * xs.length) - 1)];
const payload = (id) =>
  JSON.stringify({
    id,
    type: 'agent_reply_delta',
    replyId: 'r1',
    delta: 'some words of a reply ',
    stepId: 's',
  });

async function run(name, publish, follow) {
  const sent = new Map();
  const lat = [];
  const stop = await follow((id) => {
    const t = sent.get(id);
    if (t !== undefined) lat.push(performance.now() - t);
  });
  await sleep(200);
  const cpu0 = process.cpuUsage();
  const pending = [];
  for (let id = 1; id <= EVENTS; id++) {
    sent.set(id, performance.now());
    pending.push(publish(id));
    if (id % Math.max(1, Math.round(RATE / 100)) === 0) await sleep(10);
  }
  await Promise.all(pending);
  const cpu = process.cpuUsage(cpu0);
  await sleep(500);
  await stop();
  console.log(
    `| ${name} | ${lat.length}/${EVENTS} | p50 ${pct(lat, 0.5).toFixed(2)} ms | p99 ${pct(lat, 0.99).toFixed(2)} ms | ` +
      `${((cpu.user + cpu.system) / EVENTS).toFixed(0)} µs CPU per event (this process: publisher and reader) |`,
  );
}

console.log(`# ${EVENTS} events at ~${RATE}/s, publish → reader`);
console.log('| engine | read | latency p50 | latency p99 | cost |');
console.log('|---|---|---|---|---|');

// JetStream
{
  const nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'BENCH_EVENTS', subjects: ['bench.events.>'], storage: StorageType.File });
  const js = jetstream(nc);
  await run(
    'JetStream stream, ordered consumer',
    (id) => js.publish('bench.events.a.s', payload(id), { msgID: `s:${id}` }),
    async (onEvent) => {
      const c = await js.consumers.get('BENCH_EVENTS', {
        filter_subjects: 'bench.events.a.s',
        deliver_policy: DeliverPolicy.All,
      });
      const msgs = await c.consume();
      void (async () => {
        for await (const m of msgs) onEvent(m.json().id);
      })();
      return () => msgs.close();
    },
  );
  await nc.close();
}

// Redis Streams behind the sessions service
{
  const nc = await connect({ servers: nats.url });
  const store = new Redis(redis.url);
  const reader = new Redis(redis.url);
  const service = await connect({ servers: nats.url });
  service.subscribe('sessions.events.append', {
    callback: (_e, msg) => {
      const event = msg.string();
      void store.xadd('ss:{a}:ev:s', 'MAXLEN', '~', '100000', '*', 'e', event).then(() => msg.respond());
    },
  });
  await service.flush();
  let stopped = false;
  await run(
    'Redis Stream via the sessions service, XREAD BLOCK',
    (id) => nc.request('sessions.events.append', payload(id), { timeout: 5000 }),
    async (onEvent) => {
      void (async () => {
        let last = '$';
        while (!stopped) {
          const got = await reader.xread('BLOCK', 200, 'STREAMS', 'ss:{a}:ev:s', last);
          for (const [, entries] of got ?? []) {
            for (const [entryId, fields] of entries) {
              last = entryId;
              onEvent(JSON.parse(fields[1]).id);
            }
          }
        }
      })();
      return async () => {
        stopped = true;
        await sleep(300);
      };
    },
  );
  await Promise.all([nc.close(), service.close()]);
  store.disconnect();
  reader.disconnect();
}

await nats.dispose();
await redis.dispose();
process.exit(0);
