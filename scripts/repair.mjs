#!/usr/bin/env node
// Rebuilds the derived views from the data they derive from, on the Redis (or Redis Cluster) the services
// use: REDIS_URL / REDIS_CLUSTER_NODES, as the services read them. Today that is the agents' list view
// (index, summaries, revs), which a request interrupted between an agent's own write and the view can
// leave one step behind. Safe while the services run. `npm run repair`.
import { AgentStore, loadConfig } from '@vab/agents';
import { createRedis, describeTarget, redisTargetOf } from '@vab/storage';
import { createLogger } from '@vab/service-kit';

const config = loadConfig(process.env);
const log = createLogger('repair', config.LOG_LEVEL);
const target = redisTargetOf(config);
const redis = createRedis(target, log, { name: 'repair' });
try {
  const started = Date.now();
  const done = await new AgentStore(redis).repairViews();
  log.info({ redis: describeTarget(target), ...done, ms: Date.now() - started }, 'agents list view rebuilt');
} finally {
  await redis.quit();
}
