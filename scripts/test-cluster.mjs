#!/usr/bin/env node
// The integration tests of every service's writes and reads, once more on a real Redis Cluster (3 masters,
// 3 replicas, started here on free ports): each test stack connects with REDIS_CLUSTER_NODES instead of its
// own single Redis. Files run one after another: they share the cluster, and one of them rewrites the
// agents' list view. Part of `npm test`.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startLocalRedisCluster } from '@vab/testkit';
import { runGroup, signalGroups } from './lib/process-group.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SUBSET = [
  'tests/integration/api/agents.test.ts',
  'tests/integration/sessions/sessions.test.ts',
  'tests/integration/api/client.test.ts',
  'tests/integration/api/idempotency.test.ts',
  'tests/integration/api/retention.test.ts',
  'tests/integration/sessions/text-sessions.test.ts',
  'tests/integration/runs/test-runs.test.ts',
  'tests/integration/api/webhooks.test.ts',
  'tests/integration/live/deploy-sweep.test.ts',
  'tests/integration/live/deploy-backfill.test.ts',
];

// a signal stops the run (vitest in a group of its own, with its workers: lib/process-group.mjs), and the
// cluster is still stopped (below)
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stopping = true;
    signalGroups(signal);
  });
}

const cluster = await startLocalRedisCluster();
console.log(`[test-cluster] Redis Cluster of ${cluster.nodes.length} nodes at ${cluster.seeds}`);
let status = 1;
try {
  const env = { ...process.env, REDIS_CLUSTER_NODES: cluster.seeds };
  delete env.REDIS_URL;
  if (!stopping) {
    const vitest = join(root, 'node_modules/vitest/vitest.mjs');
    status = await runGroup(process.execPath, [vitest, 'run', '--no-file-parallelism', ...SUBSET], {
      cwd: root,
      env,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  }
} finally {
  await cluster.dispose();
}
process.exit(status);
