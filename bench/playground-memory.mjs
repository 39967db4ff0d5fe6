#!/usr/bin/env node
// Starts and stops N voice playground sessions (default 200) through the real gateway → NATS → playground
// path against the in-test LiveKit RoomService fake, with the room agents stubbed (no media server can run
// here), and reports the heap before and after. A leak of a session's state, timers or subscriptions shows
// as a heap that does not return to its baseline.
// Usage: npm run build && node --expose-gc bench/playground-memory.mjs [N]
import { connectNats } from '@vab/bus';
import { createLogger } from '@vab/service-kit';
import { loadConfig, startPlaygroundService } from '@vab/playground';
import { startLivekitFake, startLocalNats } from '@vab/testkit';
import { performance } from 'node:perf_hooks';
import { sessionStartBody, startGateway } from './playground-gateway.mjs';
import { admissionOff, sendJson } from './processes.mjs';

if (typeof globalThis.gc !== 'function') {
  console.error('run with: node --expose-gc bench/playground-memory.mjs');
  process.exit(2);
}
const N = Number(process.argv[2] ?? 200);
const log = createLogger('bench', 'silent');
const nats = await startLocalNats();
const fake = await startLivekitFake();
const roomAgents = {
  stopped: 0,
  async start() {
    return { stop: async () => void this.stopped++ };
  },
};
const pgNc = await connectNats({ url: nats.url, name: 'playground', service: 'playground' }, log);
const playground = startPlaygroundService({
  nc: pgNc,
  log,
  roomAgents,
  config: {
    // the test flow's webhook is on loopback
    ...loadConfig({ FLOW_EGRESS_ALLOW: '127.0.0.1', ...admissionOff() }),
    ENV_FILE: '/nonexistent',
    INSTANCE_ID: 'bench',
    MAX_SESSIONS: 1000,
    REAPER_INTERVAL_MS: 3600000,
  },
});
await playground.ready;
const gateway = await startGateway({ natsUrl: nats.url, log, requestTimeoutMs: 10000 });
const base = gateway.base;
const body = sessionStartBody(fake);

async function cycle(count) {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const { roomName } = await sendJson('POST', `${base}/api/agent-session`, body);
    await sendJson('DELETE', `${base}/api/agent-session`, { roomName });
  }
  return performance.now() - t0;
}
const heap = async () => {
  fake.calls.length = 0; // the fake records every call it served: not ours to count
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await new Promise((r) => setTimeout(r, 50));
  }
  return process.memoryUsage().heapUsed;
};
const MB = (b) => (b / 1024 / 1024).toFixed(2);

await cycle(20); // warm-up: JIT, connection pools, lazily loaded modules
const before = await heap();
const ms = await cycle(N);
const after = await heap();
console.log(
  `sessions started and stopped: ${N} (+20 warm-up), in ${(ms / 1000).toFixed(1)} s (${(ms / N).toFixed(1)} ms per create+delete)`,
);
console.log(`heap used: baseline ${MB(before)} MB, after ${MB(after)} MB, delta ${MB(after - before)} MB`);
console.log(
  `left behind: rooms ${fake.rooms.size}, sessions ${playground.sessions.size}, agents not stopped ${N + 20 - roomAgents.stopped}`,
);

await gateway.close();
await playground.stop(1000);
await pgNc.close();
await fake.close();
await nats.dispose();
process.exit(0);
