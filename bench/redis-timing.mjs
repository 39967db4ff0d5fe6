#!/usr/bin/env node
// What timing every Redis command costs, per way of doing it: none; ioredis's own `ioredis:command` tracing
// channel (node:diagnostics_channel, subscribed as a metrics observer would); and the wrapper of
// `sendCommand` that createRedis installs (packages/storage/src/observe.ts). One client, HGETALL of a 3 KB
// hash, 50 in flight; this process's CPU per command, the three ways alternately, median of the rounds.
// Usage: npm run build && node bench/redis-timing.mjs [--commands 40000] [--rounds 6]
import { tracingChannel } from 'node:diagnostics_channel';
import { pino } from 'pino';
import { createRedis, observeRedisCommands } from '@vab/storage';
import { startLocalRedis } from '@vab/testkit';
import { option } from './processes.mjs';

const N = option('commands', 40_000);
const ROUNDS = option('rounds', 6);
const server = await startLocalRedis();
const log = pino({ level: 'silent' });
let observed = 0;
const observe = () => void observed++;

const plain = createRedis(server.url, log, { name: 'bench-plain' });
observeRedisCommands(observe);
const wrapped = createRedis(server.url, log, { name: 'bench-wrapped' });
observeRedisCommands(undefined);
await plain.hset('bench:{h}', { a: 'x'.repeat(3000), b: '1' });

const channel = tracingChannel('ioredis:command');
const subscriber = {
  start: (ctx) => void (ctx.startedAt = performance.now()),
  end: () => undefined,
  asyncStart: () => undefined,
  asyncEnd: (ctx) => void (performance.now() - ctx.startedAt, observed++),
  error: () => undefined,
};

async function cpuPerCommand(redis) {
  const before = process.cpuUsage();
  for (let i = 0; i < N; i += 50)
    await Promise.all(Array.from({ length: 50 }, () => redis.hgetall('bench:{h}')));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / N;
}

const ways = {
  none: () => cpuPerCommand(plain),
  'ioredis:command channel': async () => {
    channel.subscribe(subscriber);
    try {
      return await cpuPerCommand(plain);
    } finally {
      channel.unsubscribe(subscriber);
    }
  },
  'sendCommand wrapper (createRedis)': () => cpuPerCommand(wrapped),
};
const results = Object.fromEntries(Object.keys(ways).map((w) => [w, []]));
await cpuPerCommand(plain);
await cpuPerCommand(wrapped);
for (let r = 0; r < ROUNDS; r++)
  for (const [name, run] of Object.entries(ways)) results[name].push(await run());
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  `# Timing Redis commands: CPU µs per command (HGETALL, 50 in flight, ${N} per round, ${ROUNDS} rounds)`,
);
console.log('| way | median µs | rounds |');
console.log('|---|---|---|');
for (const [name, xs] of Object.entries(results)) {
  console.log(`| ${name} | ${median(xs).toFixed(2)} | ${xs.map((x) => x.toFixed(1)).join(', ')} |`);
}
plain.disconnect();
wrapped.disconnect();
await server.dispose();
if (observed === 0) throw new Error('nothing was observed');
process.exit(0);
