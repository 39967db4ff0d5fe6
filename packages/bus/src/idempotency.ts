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
