#!/usr/bin/env node
// The integration tests of every service's writes and reads, once more on a real Redis Cluster (3 masters,
// 3 replicas, started here on free ports): each test stack connects with REDIS_CLUSTER_NODES instead of its
// own single Redis. Files run one after another: they share the cluster, and one of them rewrites the
// agents' list view. Part of `npm test`.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startLocalRedisCluster } from '@vab/testkit';

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

// a SIGTERM stops the run (vitest itself, not through npx, which would not pass it on), and the cluster is
// still stopped (below); Ctrl-C reaches the run by itself
let stopping = false;
let run;
process.on('SIGTERM', () => {
  stopping = true;
  run?.kill('SIGTERM');
});
process.on('SIGINT', () => (stopping = true));

const cluster = await startLocalRedisCluster();
console.log(`[test-cluster] Redis Cluster of ${cluster.nodes.length} nodes at ${cluster.seeds}`);
let status = 1;
try {
  const env = { ...process.env, REDIS_CLUSTER_NODES: cluster.seeds };
  delete env.REDIS_URL;
  if (!stopping) {
    run = spawn(
      process.execPath,
      [join(root, 'node_modules/vitest/vitest.mjs'), 'run', '--no-file-parallelism', ...SUBSET],
      {
        cwd: root,
        env,
        stdio: 'inherit',
      },
    );
    status = await new Promise((resolve) => {
      run.on('error', () => resolve(1));
      run.on('exit', (code) => resolve(code ?? 1));
    });
  }
} finally {
  await cluster.dispose();
}
process.exit(status);
