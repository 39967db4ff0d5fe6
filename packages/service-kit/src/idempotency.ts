import type { Interceptor } from '@vab/bus';
import { AppError, Headers } from '@vab/contracts';
import { storage, type RedisClient } from '@vab/storage';
import { createHash } from 'node:crypto';

/** What a store remembers of a request made with an Idempotency-Key. */
export type IdempotencyBegin =
  | { state: 'new' }
  | { state: 'pending' }
  | { state: 'mismatch' }
  | { state: 'done'; json: string; headers: Record<string, string> };

/**
 * Remembers, per key, the request's fingerprint and the reply the first request got, for a while (e.g.
 * 24 h). `begin` claims a key atomically: of two concurrent requests with one key, one runs and the other
 * is told the first is in progress.
 */
export interface IdempotencyStore {
  begin(key: string, fingerprint: string): Promise<IdempotencyBegin>;
  complete(key: string, fingerprint: string, json: string, headers: Record<string, string>): Promise<void>;
  /** The request failed: the key is free again, so a retry can run. */
  abort(key: string): Promise<void>;
}

/** For a service without Redis: per instance, bounded, for `ttlMs`. */
export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly entries = new Map<
    string,
    { fingerprint: string; at: number; json?: string; headers?: Record<string, string> }
  >();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  async begin(key: string, fingerprint: string): Promise<IdempotencyBegin> {
    const now = Date.now();
    const e = this.entries.get(key);
    if (e && now - e.at < this.ttlMs) {
      if (e.fingerprint !== fingerprint) return { state: 'mismatch' };
      return e.json === undefined
        ? { state: 'pending' }
        : { state: 'done', json: e.json, headers: e.headers ?? {} };
    }
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(key, { fingerprint, at: now });
    return { state: 'new' };
  }

  async complete(
    key: string,
    fingerprint: string,
    json: string,
    headers: Record<string, string>,
  ): Promise<void> {
    this.entries.set(key, { fingerprint, at: Date.now(), json, headers });
  }

  async abort(key: string): Promise<void> {
    this.entries.delete(key);
  }
}

/**
 * Idempotency keys in the owning service's own Redis keyspace (`<prefix>idem:<subject>:<key>`): a hash
 * with the request's fingerprint and, once done, the reply, kept for `ttlS`.
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly ttlS = 24 * 3600,
  ) {}

  private k(key: string) {
    return `${this.prefix}idem:${key}`;
  }

  async begin(key: string, fingerprint: string): Promise<IdempotencyBegin> {
    return storage(async () => {
      const claimed = await this.redis.set(
        this.k(key),
        JSON.stringify({ f: fingerprint }),
        'EX',
        this.ttlS,
        'NX',
      );
      if (claimed === 'OK') return { state: 'new' as const };
      const raw = await this.redis.get(this.k(key));
      if (raw === null) return this.begin(key, fingerprint); // expired in between
      const v = JSON.parse(raw) as { f: string; j?: string; h?: Record<string, string> };
      if (v.f !== fingerprint) return { state: 'mismatch' as const };
      return v.j === undefined
        ? { state: 'pending' as const }
        : { state: 'done' as const, json: v.j, headers: v.h ?? {} };
    });
  }

  async complete(key: string, fingerprint: string, json: string, headers: Record<string, string>) {
    await storage(() =>
      this.redis.set(this.k(key), JSON.stringify({ f: fingerprint, j: json, h: headers }), 'EX', this.ttlS),
    );
  }

  async abort(key: string) {
    await storage(() => this.redis.del(this.k(key)));
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Idempotency-Key handling for the subjects the contract calls idempotent: the first request with a key
 * runs and its reply is kept; a retry with the same key and the same request gets that reply again (and
 * creates nothing); the same key with another request, or while the first is still running, answers 409.
 * A request that failed leaves its key free, so its retry runs.
 */
export function idempotency(store: IdempotencyStore): Interceptor {
  return async ({ subject, header, request, log, run }) => {
    const key = header(Headers.idempotencyKey);
    if (!key) return run();
    const stored = `${subject}:${key}`;
    const fingerprint = createHash('sha256').update(JSON.stringify(request)).digest('base64url');
    const begun = await store.begin(stored, fingerprint);
    if (begun.state === 'mismatch') {
      throw new AppError('CONFLICT', 'this Idempotency-Key was already used with a different request');
    }
    if (begun.state === 'pending') {
      throw new AppError(
        'CONFLICT',
        'a request with this Idempotency-Key is still in progress; retry shortly',
      );
    }
    if (begun.state === 'done') {
      log.info('idempotent replay');
      return {
        data: encoder.encode(begun.json),
        headers: { ...begun.headers, [Headers.idempotentReplayed]: 'true' },
      };
    }
    let reply;
    try {
      reply = await run();
    } catch (err) {
      await store.abort(stored).catch(() => undefined);
      throw err;
    }
    await store.complete(stored, fingerprint, decoder.decode(reply.data), reply.headers);
    return reply;
  };
}
