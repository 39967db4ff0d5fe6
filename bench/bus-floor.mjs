#!/usr/bin/env node
// The bus alone: CPU per request/reply of our BusClient (reply mux, coalesced writes, a request-id header)
// against a bare nats.js responder that answers a 2 KB reply, 50 requests in flight, nothing else running.
// Compare with the bus's share of `cpu-split.mjs` to see what the full stack adds around it.
// Usage: npm run build && node bench/bus-floor.mjs [--seconds 5]
import { spawn } from 'node:child_process';
import { Buffer } from 'node:buffer';
import { startLocalNats, stopOnExit } from '@vab/testkit';
import { perRequest, usage } from './processes.mjs';
import { sleep } from './lib/figures.mjs';

const IN_FLIGHT = 50;
const role = process.argv[2];

if (role === 'responder' || role === 'requester') {
  const { connectNats, BusClient } = await import('@vab/bus');
  const { createLogger } = await import('@vab/service-kit');
  const log = createLogger(role, 'warn');
  const nc = await connectNats({ url: process.argv[3], name: role, service: role }, log);
  if (role === 'responder') {
    const body = Buffer.from(JSON.stringify({ id: 'a', flow: 'x'.repeat(2000) }));
    nc.subscribe('agents.get', { queue: 'agents', callback: (_e, m) => m.respond(body) });
    console.log('ready');
  } else {
    const bus = new BusClient(nc);
    let done = 0;
    const loop = async () => {
      for (;;) {
        await bus.requestRaw('agents.get', { id: 'abc' }, { timeoutMs: 5000, requestId: `r-${done}` });
        done++;
      }
    };
    for (let i = 0; i < IN_FLIGHT; i++) void loop();
    process.on('message', () => process.send?.(done));
  }
} else {
  const i = process.argv.indexOf('--seconds');
  const seconds = i > 0 ? Number(process.argv[i + 1]) : 5;
  const nats = await startLocalNats();
  const child = (r, ipc) =>
    stopOnExit(
      spawn(process.execPath, [process.argv[1], r, nats.url], {
        stdio: ['ignore', 'pipe', 'inherit', ...(ipc ? ['ipc'] : [])],
      }),
    );
  const responder = child('responder', false);
  await new Promise((r) => responder.stdout.once('data', r));
  const requester = child('requester', true);
  const count = () => {
    requester.send('count');
    return new Promise((r) => requester.once('message', r));
  };
  await sleep(2000); // warm-up
  const pids = { requester: requester.pid, responder: responder.pid, 'nats-server': nats.child.pid };
  const before = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, usage(p)]));
  const n0 = await count();
  await sleep(seconds * 1000);
  const n1 = await count();
  const after = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, usage(p)]));
  const n = n1 - n0;
  console.log(`# the bus alone: ${IN_FLIGHT} requests in flight, ${seconds} s, node ${process.version}`);
  console.log(`${Math.round(n / seconds)} req/s\n`);
  console.log('| process | µs per request | read syscalls per request | write syscalls per request |');
  console.log('|---|---|---|---|');
  let sum = 0;
  for (const k of Object.keys(pids)) {
    const used = perRequest(before[k], after[k], n);
    sum += used.us;
    console.log(`| ${k} | ${used.us.toFixed(1)} | ${used.reads.toFixed(3)} | ${used.writes.toFixed(3)} |`);
  }
  console.log(`| all | ${sum.toFixed(1)} | | |`);
  requester.kill();
  responder.kill();
  await nats.dispose();
  process.exit(0);
}
