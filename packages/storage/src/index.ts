import { AppError } from '@vab/contracts';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

export { Redis, Cluster } from 'ioredis';

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

const connectionOptions = (name: string): RedisOptions => ({
  connectionName: name,
  maxRetriesPerRequest: 1,
  enableOfflineQueue: true,
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
export function createRedis(target: RedisTarget | string, log: Logger, opts: { name: string }): RedisClient {
  const t = typeof target === 'string' ? { url: target } : target;
  let down = false;
  const watch = (client: RedisClient) => {
    client.on('error', (err: Error) => {
      if (!down) log.warn({ err: err.message }, 'redis error');
      down = true;
    });
    client.on('ready', () => {
      if (down) log.info('redis reconnected');
      down = false;
    });
  };
  if ('url' in t) {
    const redis = new Redis(t.url, connectionOptions(opts.name));
    watch(redis);
    // every (re)connect makes a new socket
    redis.on('connect', () => coalesceWrites((redis as unknown as { stream?: Socket }).stream, log));
    return redis;
  }
  const cluster = new Cluster(t.clusterNodes, {
    redisOptions: { ...connectionOptions(opts.name), ...(t.password ? { password: t.password } : {}) },
    enableOfflineQueue: true,
    // a failover takes the cluster's node timeout plus an election: wait for it instead of failing at once
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    retryDelayOnTryAgain: 100,
    clusterRetryStrategy: (times) => Math.min(100 * times, 2000),
    slotsRefreshTimeout: 2000,
  });
  watch(cluster);
  // each node connection is a Redis of its own: the same write coalescing on every one of them
  cluster.on('+node', (node: Redis) =>
    node.on('connect', () => coalesceWrites((node as unknown as { stream?: Socket }).stream, log)),
  );
  return cluster;
}

/**
 * Each master of a cluster (or the one server): what a scan over the whole keyspace must visit, since a
 * SCAN on a cluster sees one node only.
 */
export function masters(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

/** Every key matching `pattern`, in batches of about `count` (SCAN, never KEYS), over every master. */
export async function* scanKeys(client: RedisClient, pattern: string, count = 500): AsyncGenerator<string[]> {
  for (const node of masters(client)) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
      cursor = next;
      if (found.length > 0) yield found;
    } while (cursor !== '0');
  }
}

/**
 * Redis replication is asynchronous: a master that fails right after answering can take an acknowledged
 * write with it. With `replicas > 0` a write is confirmed only once that many replicas hold it (`WAIT`, sent
 * to the node that owns `key`, on the connection that wrote it), else the request fails with 503 and the
 * caller retries it (with its Idempotency-Key). `replicas = 0`: Redis's default, no wait.
 */
export class WriteConcern {
  constructor(
    private readonly client: RedisClient,
    readonly replicas: number,
    private readonly timeoutMs: number,
  ) {}

  async confirm(key: string): Promise<void> {
    if (this.replicas === 0) return;
    // a pipeline goes to the node that owns its keyed command; WAIT then counts that node's replicas
    const res = await storage(() =>
      this.client.pipeline().exists(key).wait(this.replicas, this.timeoutMs).exec(),
    );
    const acked = Number(res?.[1]?.[1] ?? 0);
    if (acked < this.replicas) {
      throw new AppError(
        'SERVICE_UNAVAILABLE',
        'the write was not confirmed by a replica in time; retry it (with the same Idempotency-Key)',
      );
    }
  }
}

const COALESCED = Symbol.for('vab.redis.coalesced-writes');

/**
 * ioredis writes each command to the socket as it is issued: one syscall per command, and one read by
 * Redis. A service answering a batch of bus requests issues tens of commands in one turn of the event
 * loop; corking the socket until setImmediate (right after the I/O phase) sends them in one write, and
 * Redis answers them in one. Order is kept (it is one stream); nothing waits longer than the rest of the
 * current turn. Kept over ioredis's own `enableAutoPipelining`, which cost the service more CPU per request
 * than this did, measured side by side (docs/performance.md › Libraries before patches).
 */
function coalesceWrites(stream: Socket | undefined, log: Logger): void {
  if (!stream || typeof stream.cork !== 'function') {
    log.warn('redis socket not as expected: command writes are not coalesced');
    return;
  }
  const s = stream as Socket & { [COALESCED]?: true };
  if (s[COALESCED]) return;
  s[COALESCED] = true;
  const write = s.write;
  s.write = function (this: Socket, ...args: unknown[]): boolean {
    if (this.writableCorked === 0 && !this.destroyed) {
      this.cork();
      setImmediate(() => this.uncork());
    }
    return (write as (...a: unknown[]) => boolean).apply(this, args);
  } as Socket['write'];
}

/** Redis failures of connectivity become SERVICE_UNAVAILABLE; anything else is left to the bus (INTERNAL). */
function translateRedisError(err: unknown): unknown {
  if (err instanceof AppError) return err;
  if (err instanceof Error) {
    const name = err.name;
    const msg = err.message;
    if (
      name === 'MaxRetriesPerRequestError' ||
      msg.includes('Connection is closed') ||
      msg.includes('ECONNREFUSED') ||
      msg.includes('ECONNRESET') ||
      msg.includes('LOADING') ||
      // a cluster between a master's failure and its replica's promotion
      msg.includes('CLUSTERDOWN') ||
      msg.includes('TRYAGAIN') ||
      msg.includes("Cluster isn't ready") ||
      msg.includes('None of startup nodes is available') ||
      msg.includes('Failed to refresh slots cache') ||
      msg.includes('Too many Cluster redirections') ||
      msg.includes("Stream isn't writeable")
    ) {
      return new AppError('SERVICE_UNAVAILABLE', 'storage is unavailable, retry shortly');
    }
  }
  return err;
}

/** Runs a storage operation and rethrows connectivity failures as SERVICE_UNAVAILABLE. */
export async function storage<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw translateRedisError(err);
  }
}

/**
 * Lua scripts that signal an expected failure do `return redis.error_reply('CODE detail')`; this maps the
 * first word to an AppError, so a script's business refusals cross the bus with their own code.
 */
export function scriptError(err: unknown, messages: Record<string, (detail: string) => AppError>): unknown {
  if (err instanceof Error) {
    // Redis prefixes `ERR ` to an error_reply whose text has no space of its own.
    const [word, ...rest] = err.message.replace(/^ERR /, '').split(' ');
    const make = word ? messages[word] : undefined;
    if (make) return make(rest.join(' '));
  }
  return translateRedisError(err);
}
