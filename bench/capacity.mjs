#!/usr/bin/env node
// Redis memory per stored thing, measured: `used_memory` before and after writing many of each through the
// API (gateway → services → a Redis of its own), divided by the count. Prints a table for
// docs/operations.md: bytes each, how many fit per GB, and what a cluster of M masters holds.
// Usage: npm run build && node bench/capacity.mjs [--agents 500]

import { Redis } from 'ioredis';
import { benchFlow, option, sendJson, startCoreStack } from './processes.mjs';
import { root } from './lib/figures.mjs';

const AGENTS = option('agents', 500);

const core = await startCoreStack(root, {
  MAX_MESSAGES_PER_SESSION: '100000000',
  MAX_CONVERSATION_ENTRIES: '100000000',
});
const { url: base, procs, nats, redis: redisServer } = core;
const redis = new Redis(redisServer.url);
const used = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))[1]);

async function measure(what, count, write) {
  const before = await used();
  const batch = 50;
  for (let i = 0; i < count; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, count - i) }, (_, j) => write(i + j)));
  }
  return { what, count, bytes: ((await used()) - before) / count };
}

const flow = benchFlow();
const flowBytes = Buffer.byteLength(JSON.stringify(flow));
const ids = [];
const rows = [];
rows.push(
  await measure(
    `agent with a 20-node flow (${(flowBytes / 1024).toFixed(1)} KB of JSON)`,
    AGENTS,
    async (i) => {
      ids[i] = (await sendJson('POST', `${base}/api/agents`, { name: `Agent ${i}`, flow })).id;
    },
  ),
);
rows.push(
  await measure('version (a save that changes one node)', AGENTS, async (i) => {
    const changed = { ...flow, nodes: flow.nodes.map((n, k) => (k === 1 ? { ...n, command: `v${i}` } : n)) };
    await sendJson('PATCH', `${base}/api/agents/${ids[i]}`, { flow: changed });
  }),
);
rows.push(
  await measure('version (an unchanged autosave)', AGENTS, async (i) => {
    const changed = { ...flow, nodes: flow.nodes.map((n, k) => (k === 1 ? { ...n, command: `v${i}` } : n)) };
    await sendJson('PATCH', `${base}/api/agents/${ids[i]}`, { flow: changed });
  }),
);
const chat = {
  role: 'user',
  content: 'Add a step that asks for the caller’s insurance number before booking, and keep it short.',
  operations: [{ type: 'add_node', node: { id: 'ins', nodeType: 'conversation', command: 'Ask for it.' } }],
};
rows.push(
  await measure(
    `chat entry (${Buffer.byteLength(JSON.stringify(chat))} B as sent)`,
    AGENTS * 10,
    async (i) => {
      await sendJson('POST', `${base}/api/agents/${ids[i % AGENTS]}/conversations`, chat);
    },
  ),
);
const sessions = [];
for (let i = 0; i < 20; i++) {
  sessions.push(
    (await sendJson('POST', `${base}/api/agents/${ids[i]}/test-sessions`, { sessionType: 'voice' })).id,
  );
}
const message = (i) => ({
  role: i % 2 ? 'assistant' : 'user',
  content: 'Sure, I can book that for Tuesday at ten. Could you confirm your date of birth, please?',
  stepId: 'collect-details',
  timestamp: 1_795_000_000_000 + i,
});
rows.push(
  await measure(`transcript message (${message(0).content.length} characters)`, AGENTS * 20, async (i) => {
    await sendJson(
      'POST',
      `${base}/api/agents/${ids[i % 20]}/test-sessions/${sessions[i % 20]}/messages`,
      message(i),
    );
  }),
);
rows.push(
  await measure('test session record (no messages)', AGENTS, async (i) => {
    await sendJson('POST', `${base}/api/agents/${ids[i]}/test-sessions`, { sessionType: 'text' });
  }),
);

const GB = 1024 ** 3;
console.log(
  `# Redis memory per stored item (redis-server ${(await redis.info('server')).match(/redis_version:(\S+)/)[1]}, used_memory deltas)`,
);
console.log('| item | measured over | bytes each | per GB of Redis memory |');
console.log('|---|---|---|---|');
for (const r of rows) {
  console.log(
    `| ${r.what} | ${r.count.toLocaleString('en')} | ${Math.round(r.bytes).toLocaleString('en')} | ${Math.floor(GB / r.bytes).toLocaleString('en')} |`,
  );
}
redis.disconnect();
for (const p of procs) p.kill('SIGTERM');
await redisServer.dispose();
await nats.dispose();
process.exit(0);
