#!/usr/bin/env node
// What one check of the canary judge reads (decision 0035): its figures counted as the calls change
// (CallsStore.canaryFigures) against the listing of both deploys' calls since the canary began (listedSide, what
// a check did before), as those calls grow. Each size: a fresh agent with a live deploy and a canary, `n` ended
// and analysed calls on each side (one turn each), then `--checks` checks each way, alternately. Prints the p50
// and p99 of a check (ms) and how many Redis commands it sent. One local redis-server.
// Usage: npm run build && node bench/canary-check.mjs [--sizes 100,1000,5000] [--checks 20]
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CallsStore, DEFAULT_LIMITS, SessionsStore, listedSide } from '@vab/sessions';
import { Redis } from '@vab/storage';
import { startLocalRedis } from '@vab/testkit';
import { fmt, pct } from './lib/figures.mjs';
import { option } from './processes.mjs';

const SIZES = String(option('sizes', '100,1000,5000')).split(',').map(Number);
const CHECKS = option('checks', 20);

const server = await startLocalRedis();
const redis = new Redis(server.url);
let commands = 0;
const send = redis.sendCommand.bind(redis);
redis.sendCommand = (...a) => {
  commands++;
  return send(...a);
};
const store = new SessionsStore(redis, { limits: DEFAULT_LIMITS });
const calls = new CallsStore(redis, 3);

async function feed(deploy, n, passing) {
  for (let i = 0; i < n; i++) {
    const callId = randomUUID();
    const { agentId } = deploy;
    await calls.create({ agentId, callId, deploy, channel: 'web', caller: {} });
    const ms = 400 + ((i * 37) % 700);
    const metrics = { responseMs: ms, e2eLatencyMs: ms };
    await calls.append(
      agentId,
      callId,
      { role: 'assistant', content: 'hi', stepId: 's', timestamp: Date.now(), metrics },
      10,
    );
    await calls.end({ agentId, callId, endedAt: Date.now(), endedReason: 'caller_hung_up', usage: [] });
    const analysis = {
      summary: null,
      criteria: [],
      success: i % 100 < passing,
      data: {},
      model: { provider: 'b', model: 'b' },
      usage: [],
      at: Date.now(),
    };
    await calls.setAnalysis({ agentId, callId, jobId: randomUUID(), requestedAt: Date.now(), analysis });
  }
}

async function timed(fn) {
  const before = commands;
  const t = performance.now();
  await fn();
  return { ms: performance.now() - t, commands: commands - before };
}

const rows = [];
try {
  for (const n of SIZES) {
    const agentId = `bench-${n}-${randomUUID().slice(0, 8)}`;
    const live = await store.createDeploy(agentId, 1, agentId);
    await store.updateDeploy(agentId, live.id, 'building');
    await store.updateDeploy(agentId, live.id, 'live');
    const next = await store.createDeploy(agentId, 2, agentId, undefined, false, { trafficPercent: 50 });
    await store.updateDeploy(agentId, next.id, 'building');
    const canary = await store.updateDeploy(agentId, next.id, 'canary');
    const liveNow = await store.getDeploy(agentId, live.id);
    await feed(canary, n, 80);
    await feed(liveNow, n, 90);
    const listed = [];
    const counted = [];
    for (let i = 0; i < CHECKS; i++) {
      listed.push(
        await timed(() =>
          Promise.all([listedSide(calls, canary, canary.liveAt), listedSide(calls, liveNow, canary.liveAt)]),
        ),
      );
      counted.push(await timed(() => calls.canaryFigures(agentId, canary.id)));
    }
    const row = (name, xs) =>
      `| ${n} | ${name} | ${fmt(
        pct(
          xs.map((x) => x.ms),
          50,
        ),
      )} | ${fmt(
        pct(
          xs.map((x) => x.ms),
          99,
        ),
      )} | ${xs[0].commands} |`;
    rows.push(row('listed (before)', listed), row('counted', counted));
  }
  console.log('| calls per side | check | p50 ms | p99 ms | Redis commands |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const r of rows) console.log(r);
} finally {
  redis.disconnect();
  await server.dispose();
}
