import { AppError } from '@vab/contracts';
import type { RedisClient } from './connection.js';
import { storage } from './errors.js';

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
