import type { Delivery, DeliveryStatus, Webhook, WebhookEventType } from '@vab/contracts';
import { storage, type RedisClient } from '@vab/storage';
import { keys } from './redis-keys.js';

/** An endpoint as stored: the API's fields, and its secrets sealed (SecretBox). */
export interface EndpointRecord {
  id: string;
  agentId: string;
  url: string;
  events: WebhookEventType[];
  description?: string | undefined;
  enabled: boolean;
  createdAt: number;
  updatedAt: number;
  secret: string;
  secretHint: string;
  /** During a rotation's overlap: the previous secret (sealed), signing beside the new one until `until`. */
  previous?: { secret: string; until: number } | undefined;
}

/** A delivery as stored: the API's fields, the agent, the body it sends, where retries count from. */
export interface DeliveryRecord extends Delivery {
  agentId: string;
  body: string;
  callId?: string | undefined;
  /** Retries go on until WEBHOOK_RETRY_FOR_MS after this (the first attempt, or a redelivery by hand). */
  retryFrom: number;
  /** Its event's place in DOMAIN_EVENTS (the stream's sequence): the order an endpoint's backlog goes in. */
  seq?: number | undefined;
}

/** Where a delivery stands in its endpoint's order: its event's sequence (older records: their creation). */
const orderOf = (rec: DeliveryRecord) => rec.seq ?? rec.createdAt;

/** Deliveries kept per endpoint in its log (the newest). */
const LOG_LENGTH = 1000;

/**
 * Claims up to ARGV[2] members of KEYS[1] due by ARGV[1] (ms) by moving their score to ARGV[3] (the claim's
 * end): a claimed delivery is attempted by one instance; an instance that dies leaves it to come due again.
 */
const CLAIM_DUE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], ARGV[3], m) end
return due
`;

/**
 * Whether delivery ARGV[2] of endpoint ARGV[1] waits behind an older one: its endpoint goes one at a time
 * (KEYS[1], the `serial` hash) and the oldest pending (KEYS[2]) is another.
 */
const WAITS_BEHIND = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if head == nil or head == ARGV[2] then return 0 end
return 1
`;

/**
 * Delivery ARGV[2] of endpoint ARGV[1] is over: off the endpoint's pending set (KEYS[2]). While the endpoint
 * goes one at a time (KEYS[1], the `serial` hash) and it was the oldest, the new oldest is next (returned);
 * with none left, the endpoint goes as before.
 */
const SETTLE_PENDING = `
local was_head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] == ARGV[2]
redis.call('ZREM', KEYS[2], ARGV[2])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return false end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if head == nil then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return false
end
if was_head then return head end
return false
`;

export const dueMember = (agentId: string, deliveryId: string) => `${agentId}/${deliveryId}`;

export class WebhookStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly retentionMs: number,
  ) {}

  // ---- endpoints

  async listEndpoints(agentId: string): Promise<EndpointRecord[]> {
    const all = await storage(() => this.redis.hvals(keys.endpoints(agentId)));
    return all.map((v) => JSON.parse(v) as EndpointRecord).sort((a, b) => a.createdAt - b.createdAt);
  }

  async getEndpoint(agentId: string, id: string): Promise<EndpointRecord | undefined> {
    const v = await storage(() => this.redis.hget(keys.endpoints(agentId), id));
    return v ? (JSON.parse(v) as EndpointRecord) : undefined;
  }

  async countEndpoints(agentId: string): Promise<number> {
    return storage(() => this.redis.hlen(keys.endpoints(agentId)));
  }

  async putEndpoint(rec: EndpointRecord): Promise<void> {
    await storage(() => this.redis.hset(keys.endpoints(rec.agentId), rec.id, JSON.stringify(rec)));
  }

  async deleteEndpoint(agentId: string, id: string): Promise<boolean> {
    const removed = await storage(() =>
      this.redis
        .multi()
        .hdel(keys.endpoints(agentId), id)
        .hdel(keys.fails(agentId), id)
        .hdel(keys.failing(agentId), id)
        .hdel(keys.serial(agentId), id)
        .exec(),
    );
    return removed?.[0]?.[1] === 1;
  }

  /** The failing reports of an agent's endpoints, by webhook id. */
  async failingOf(agentId: string): Promise<Record<string, NonNullable<Webhook['failing']>>> {
    const all = await storage(() => this.redis.hgetall(keys.failing(agentId)));
    return Object.fromEntries(Object.entries(all).map(([id, v]) => [id, JSON.parse(v)]));
  }

  /**
   * One more failed attempt in a row; the report is set once the count reaches `after` and none was set:
   * true when this call set it (the caller then tells the builder, once).
   */
  async recordFailure(agentId: string, webhookId: string, after: number, lastError: string, now: number) {
    // from now on its deliveries go one at a time, oldest first, until its backlog is gone
    await this.redis.hset(keys.serial(agentId), webhookId, 1);
    const n = await this.redis.hincrby(keys.fails(agentId), webhookId, 1);
    if (n < after) return false;
    const report = JSON.stringify({ since: now, consecutiveFailures: n, lastError });
    const set = await this.redis.hsetnx(keys.failing(agentId), webhookId, report);
    // still failing: the count and last error are kept current on the report
    if (set === 0)
      await this.redis.hset(keys.failing(agentId), webhookId, this.updated(report, n, lastError));
    return set === 1;
  }

  private updated(report: string, n: number, lastError: string): string {
    return JSON.stringify({ ...(JSON.parse(report) as object), consecutiveFailures: n, lastError });
  }

  /** A delivered attempt: the endpoint fails no more. Says whether it had been reported failing. */
  async recordSuccess(agentId: string, webhookId: string): Promise<{ wasFailing: boolean }> {
    const r = await this.redis
      .multi()
      .hdel(keys.fails(agentId), webhookId)
      .hdel(keys.failing(agentId), webhookId)
      .exec();
    return { wasFailing: r?.[1]?.[1] === 1 };
  }

  /**
   * Whether a delivery waits behind an older one of its endpoint (the endpoint goes one at a time since an
   * attempt failed): it is then put off by `recheckMs` (the next in line is scheduled when the one before it
   * is over; the recheck only covers an instance that died in between).
   */
  async waitsBehind(rec: DeliveryRecord, now: number, recheckMs: number): Promise<boolean> {
    const behind = (await this.redis.eval(
      WAITS_BEHIND,
      2,
      keys.serial(rec.agentId),
      keys.pending(rec.agentId, rec.webhookId),
      rec.webhookId,
      rec.id,
    )) as number;
    if (behind !== 1) return false;
    await this.schedule(rec.agentId, rec.id, now + recheckMs);
    return true;
  }

  /**
   * A delivery is over (delivered, failed, cancelled): off the schedule and the endpoint's pending set. While
   * the endpoint goes one at a time, the next in line comes due now: true when one did.
   */
  async settle(agentId: string, webhookId: string, deliveryId: string, now = Date.now()): Promise<boolean> {
    // two slots on a Redis Cluster (the schedule's, the agent's): one command each
    await storage(() => this.redis.zrem(keys.due, dueMember(agentId, deliveryId)));
    const next = (await this.redis.eval(
      SETTLE_PENDING,
      2,
      keys.serial(agentId),
      keys.pending(agentId, webhookId),
      webhookId,
      deliveryId,
    )) as string | null;
    if (!next) return false;
    await this.schedule(agentId, next, now);
    return true;
  }

  // ---- deliveries

  /**
   * Stores a new delivery, due now, unless it exists (a redelivered event makes the same id): false then.
   */
  async createDelivery(rec: DeliveryRecord): Promise<boolean> {
    const ttl = Math.ceil(this.retentionMs / 1000);
    const created = await storage(() =>
      this.redis.set(keys.delivery(rec.agentId, rec.id), JSON.stringify(rec), 'EX', ttl, 'NX'),
    );
    if (created !== 'OK') return false;
    const logKey = keys.log(rec.agentId, rec.webhookId);
    const m = this.redis
      .multi()
      .zadd(logKey, rec.createdAt, rec.id)
      .zremrangebyrank(logKey, 0, -LOG_LENGTH - 1);
    m.pexpire(logKey, this.retentionMs);
    const pendingKey = keys.pending(rec.agentId, rec.webhookId);
    m.zadd(pendingKey, orderOf(rec), rec.id).pexpire(pendingKey, this.retentionMs);
    if (rec.callId)
      m.sadd(keys.call(rec.agentId, rec.callId), rec.id).pexpire(
        keys.call(rec.agentId, rec.callId),
        this.retentionMs,
      );
    await storage(() => m.exec());
    await this.schedule(rec.agentId, rec.id, rec.createdAt);
    return true;
  }

  async getDelivery(agentId: string, id: string): Promise<DeliveryRecord | undefined> {
    const v = await storage(() => this.redis.get(keys.delivery(agentId, id)));
    return v ? (JSON.parse(v) as DeliveryRecord) : undefined;
  }

  /** Saves a delivery's new state, keeping its expiry. */
  async saveDelivery(rec: DeliveryRecord): Promise<void> {
    await storage(() => this.redis.set(keys.delivery(rec.agentId, rec.id), JSON.stringify(rec), 'KEEPTTL'));
  }

  /** An endpoint's newest deliveries, newest first. */
  async listDeliveries(agentId: string, webhookId: string, limit = 100): Promise<DeliveryRecord[]> {
    const ids = await storage(() => this.redis.zrevrange(keys.log(agentId, webhookId), 0, limit - 1));
    if (ids.length === 0) return [];
    const values = await storage(() => this.redis.mget(ids.map((id) => keys.delivery(agentId, id))));
    return values.flatMap((v) => (v ? [JSON.parse(v) as DeliveryRecord] : []));
  }

  /** The pending deliveries of one call's events: cancelled (its call was erased). */
  async cancelCall(agentId: string, callId: string, now: number): Promise<number> {
    const ids = await storage(() => this.redis.smembers(keys.call(agentId, callId)));
    let n = 0;
    for (const id of ids) {
      const rec = await this.getDelivery(agentId, id);
      if (!rec) continue;
      if (rec.status === 'pending') n++;
      const next = rec.status === 'pending' ? finish(rec, 'cancelled', now, 'its call was erased') : rec;
      // the body carries the call's data: erased with the call; the record's figures stay
      await this.saveDelivery({ ...next, body: '' });
      await this.settle(agentId, rec.webhookId, id);
    }
    await storage(() => this.redis.del(keys.call(agentId, callId)));
    return n;
  }

  // ---- the schedule

  async schedule(agentId: string, deliveryId: string, at: number): Promise<void> {
    await storage(() => this.redis.zadd(keys.due, at, dueMember(agentId, deliveryId)));
  }

  /** A delivery pending again (a redelivery by hand): due at `at`, on its endpoint's pending set. */
  async reopen(rec: DeliveryRecord, at: number): Promise<void> {
    await storage(() => this.redis.zadd(keys.pending(rec.agentId, rec.webhookId), orderOf(rec), rec.id));
    await this.schedule(rec.agentId, rec.id, at);
  }

  async unschedule(agentId: string, deliveryId: string): Promise<void> {
    await storage(() => this.redis.zrem(keys.due, dueMember(agentId, deliveryId)));
  }

  /** Claims up to `n` deliveries due by `now` until `claimUntil`: `[agentId, deliveryId]` pairs. */
  async claimDue(now: number, n: number, claimUntil: number): Promise<[string, string][]> {
    const members = (await this.redis.eval(CLAIM_DUE, 1, keys.due, now, n, claimUntil)) as string[];
    return members.map((m) => {
      const at = m.indexOf('/');
      return [m.slice(0, at), m.slice(at + 1)];
    });
  }

  /** Deliveries waiting for an attempt, over every agent (the backlog). */
  async pendingCount(): Promise<number> {
    return this.redis.zcard(keys.due);
  }
}

/** A delivery's record once it is over (delivered, failed or cancelled). */
export function finish(
  rec: DeliveryRecord,
  status: Exclude<DeliveryStatus, 'pending'>,
  now: number,
  error?: string,
): DeliveryRecord {
  const { nextAttemptAt: _next, ...rest } = rec;
  return {
    ...rest,
    status,
    ...(status === 'delivered' ? { deliveredAt: now } : {}),
    ...(error ? { lastError: error } : {}),
  };
}

/** What the API shows of a delivery: never its body. */
export function publicDelivery(rec: DeliveryRecord): Delivery {
  const { agentId: _a, body: _b, callId: _c, retryFrom: _r, seq: _s, ...shown } = rec;
  return shown;
}

/** What the API shows of an endpoint: never a secret. */
export function publicWebhook(rec: EndpointRecord, failing: Webhook['failing'], now: number): Webhook {
  return {
    id: rec.id,
    agentId: rec.agentId,
    url: rec.url,
    events: rec.events,
    ...(rec.description !== undefined ? { description: rec.description } : {}),
    enabled: rec.enabled,
    createdAt: rec.createdAt,
    updatedAt: rec.updatedAt,
    secretHint: rec.secretHint,
    ...(rec.previous && rec.previous.until > now ? { previousSecretUntil: rec.previous.until } : {}),
    ...(failing ? { failing } : {}),
  };
}
