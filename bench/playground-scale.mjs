#!/usr/bin/env node
// Scenario 5 of the performance issue: POST /api/agent-session + DELETE through the real gateway → NATS →
// playground path against the LiveKit RoomService fake, with the room agents stubbed. Prints
//  - the service's own overhead per create (sequential creates, room agents that join at once), and
//  - sessions/s with 1, 2 and 3 playground instances when joining is the bottleneck: each instance's
//    room agents join one room at a time, JOIN_MS each (a stand-in for the real join), so an instance can start at
//    most 1000/JOIN_MS sessions/s and throughput grows only if the queue group spreads creates.
// Usage: npm run build && node bench/playground-scale.mjs [--join-ms 50] [--sessions 120]
import { connectNats } from '@vab/bus';
import { createLogger } from '@vab/service-kit';
import { loadConfig, startPlaygroundService } from '@vab/playground';
import { startLivekitFake, startLocalNats } from '@vab/testkit';
import { performance } from 'node:perf_hooks';
import { sessionStartBody, startGateway } from './playground-gateway.mjs';
import { admissionOff, option, sendJson } from './processes.mjs';

const JOIN_MS = option('join-ms', 50);
const SESSIONS = option('sessions', 120);
const log = createLogger('bench', 'silent');
const nats = await startLocalNats();
const fake = await startLivekitFake();
const config = (id) => ({
  // the test flow's webhook is on loopback
  ...loadConfig({ FLOW_EGRESS_ALLOW: '127.0.0.1', ...admissionOff() }),
  ENV_FILE: '/nonexistent',
  INSTANCE_ID: id,
  MAX_SESSIONS: 1000,
  AGENT_JOIN_TIMEOUT_MS: 60000, // the serial room agents queue joins: waiting is the point here
  REAPER_INTERVAL_MS: 3600000,
});
/** Joins one room at a time per instance, `joinMs` each. */
function serialRoomAgents(joinMs) {
  let chain = Promise.resolve();
  return {
    start() {
      const joined = chain.then(() => new Promise((r) => setTimeout(r, joinMs)));
      chain = joined;
      return joined.then(() => ({ stop: async () => undefined }));
    },
  };
}
const instances = [];
async function addInstance(joinMs) {
  const nc = await connectNats(
    { url: nats.url, name: `playground-${instances.length + 1}`, service: 'playground' },
    log,
  );
  const svc = startPlaygroundService({
    nc,
    log,
    config: config(`bench-${instances.length + 1}`),
    roomAgents: serialRoomAgents(joinMs),
  });
  await svc.ready;
  instances.push({ nc, svc });
}
const gateway = await startGateway({ natsUrl: nats.url, log, requestTimeoutMs: 60000 });
const base = gateway.base;
const body = sessionStartBody(fake);
const create = async () => (await sendJson('POST', `${base}/api/agent-session`, body)).roomName;
const end = (roomName) => sendJson('DELETE', `${base}/api/agent-session`, { roomName });

// overhead: sequential creates with room agents that join at once
await addInstance(0);
for (let i = 0; i < 20; i++) await end(await create()); // warm-up
const times = [];
for (let i = 0; i < 100; i++) {
  const t0 = performance.now();
  const room = await create();
  times.push(performance.now() - t0);
  await end(room);
}
times.sort((a, b) => a - b);
console.log(
  `service overhead per create (runner joins at once, sequential): p50 ${times[50].toFixed(1)} ms, p99 ${times[98].toFixed(1)} ms`,
);
await instances.pop().svc.stop(1000);

console.log(
  `\n| instances | sessions/s (runner ${JOIN_MS} ms per join, one at a time per instance) | creates per instance |`,
);
console.log('|---|---|---|');
let base1;
for (let n = 1; n <= 3; n++) {
  while (instances.length < n) await addInstance(JOIN_MS);
  const t0 = performance.now();
  const rooms = await Promise.all(Array.from({ length: SESSIONS }, () => create()));
  const rate = SESSIONS / ((performance.now() - t0) / 1000);
  base1 ??= rate;
  const per = instances.map((i) => i.svc.sessions.size).join(' / ');
  console.log(`| ${n} | ${rate.toFixed(1)} (×${(rate / base1).toFixed(2)}) | ${per} |`);
  await Promise.all(rooms.map(end));
}
await gateway.close();
for (const i of instances) {
  await i.svc.stop(1000);
  await i.nc.close();
}
await fake.close();
await nats.dispose();
process.exit(0);
