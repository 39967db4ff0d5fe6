import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { timeCommands } from './observe.js';
import { coalesceWrites } from './write-patch.js';

/** One Redis server or a Redis Cluster: every store takes either (the commands they use exist on both). */
export type RedisClient = Redis | Cluster;

/** Where a service's data lives: one server (`url`) or a cluster (`clusterNodes`, seed `host:port`s). */
export type RedisTarget =
  { url: string } | { clusterNodes: { host: string; port: number }[]; password?: string | undefined };

/** `REDIS_CLUSTER_NODES` (`host:port,host:port,…`) wins over `REDIS_URL` when set. */
export function redisTargetOf(config: {
  REDIS_URL: string;
  REDIS_CLUSTER_NODES?: string | undefined;
  REDIS_CLUSTER_PASSWORD?: string | undefined;
}): RedisTarget {
  if (!config.REDIS_CLUSTER_NODES?.trim()) return { url: config.REDIS_URL };
  return {
    password: config.REDIS_CLUSTER_PASSWORD,
    clusterNodes: config.REDIS_CLUSTER_NODES.split(',').map((hp) => {
      const at = hp.trim().lastIndexOf(':');
      return { host: hp.trim().slice(0, at), port: Number(hp.trim().slice(at + 1)) };
    }),
  };
}

/** A short description of the target for logs: never a URL (it may carry a password). */
export const describeTarget = (t: RedisTarget) =>
  'url' in t ? 'single' : `cluster of ${t.clusterNodes.length} seed nodes`;

const connectionOptions = (name: string, offlineQueue: boolean): RedisOptions => ({
  connectionName: name,
  maxRetriesPerRequest: 1,
  enableOfflineQueue: offlineQueue,
  connectTimeout: 2000,
  retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
  lazyConnect: false,
});

/**
 * A Redis connection that reconnects forever (a restarted Redis must not need a restart of ours) but
 * fails a command after one retry, so a request during an outage answers 503 quickly instead of hanging
 * until the gateway's timeout. On a cluster ioredis follows MOVED/ASK itself and, when a master fails,
 * retries the slot's commands until the replica that takes over answers (bounded by the gateway's timeout).
 */
export function createRedis(
  target: RedisTarget | string,
  log: Logger,
  opts: {
    name: string;
    /**
     * Queue commands while (re)connecting (default). Off for a Redis a request must never wait for (the
     * gateway's rate-limit counters): a command then fails at once while the connection is down.
     */
    offlineQueue?: boolean;
  },
): RedisClient {
  const t = typeof target === 'string' ? { url: target } : target;
  const offlineQueue = opts.offlineQueue ?? true;
  let down = false;
  const watch = (client: RedisClient) => {
    client.on('error', (err: Error) => {
      if (!down) log.warn({ code: 'REDIS_ERROR', err: err.message }, 'redis error');
      down = true;
    });
    client.on('ready', () => {
      if (down) log.info('redis reconnected');
      down = false;
    });
  };
  if ('url' in t) {
    const redis = new Redis(t.url, connectionOptions(opts.name, offlineQueue));
    watch(redis);
    timeCommands(redis);
    // every (re)connect makes a new socket
    redis.on('connect', () => coalesceWrites((redis as unknown as { stream?: Socket }).stream, log));
    return redis;
  }
  const cluster = new Cluster(t.clusterNodes, {
    redisOptions: {
      ...connectionOptions(opts.name, offlineQueue),
      ...(t.password ? { password: t.password } : {}),
    },
    enableOfflineQueue: offlineQueue,
    // a failover takes the cluster's node timeout plus an election: wait for it instead of failing at once
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    retryDelayOnTryAgain: 100,
    clusterRetryStrategy: (times) => Math.min(100 * times, 2000),
    slotsRefreshTimeout: 2000,
  });
  watch(cluster);
  timeCommands(cluster);
  // each node connection is a Redis of its own: the same write coalescing on every one of them
  cluster.on('+node', (node: Redis) =>
    node.on('connect', () => coalesceWrites((node as unknown as { stream?: Socket }).stream, log)),
  );
  return cluster;
}
