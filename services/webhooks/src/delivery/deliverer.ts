import { safeError, type Logger } from '@vab/bus';
import { WebhookHeaders, type DomainEvent } from '@vab/contracts';
import { EgressRefused, type EgressFetch, type EgressPolicy, type HostCheck } from '@vab/egress';
import type { SecretBox } from '@vab/service-kit';
import { outcomeOf, retryAfterMs, retryDelayMs, type RetryPolicy } from '../backoff.js';
import { webhooksMetrics } from '../metrics.js';
import { signatureHeader } from '../signing.js';
import { finish, type DeliveryRecord, type EndpointRecord, type WebhookStore } from '../store.js';

export interface DelivererOptions {
  store: WebhookStore;
  box: SecretBox;
  fetch: EgressFetch;
  /** Resolves a URL's name and refuses it when it leads inside (the connect checks the address again). */
  hostCheck: HostCheck;
  policy: EgressPolicy;
  log: Logger;
  retry: RetryPolicy;
  timeoutMs: number;
  concurrency: number;
  pollMs: number;
  failingAfter: number;
  /** Tells the builder an endpoint keeps failing (a `webhook.failing` domain event). */
  reportFailing(endpoint: EndpointRecord, lastError: string, now: number): Promise<void>;
  now?: () => number;
}

/**
 * How long a delivery waiting behind an older one of its endpoint is put off. Its turn is scheduled when the
 * one before it is over; this only bounds the wait when the instance doing that died in between.
 */
const WAIT_RECHECK_MS = 300_000;

/** What one attempt came to. */
type Attempt =
  | { kind: 'ok'; status: number }
  | { kind: 'retry'; status?: number; error: string; retryAfterMs?: number | undefined }
  | { kind: 'fail'; status?: number; error: string };

/**
 * Attempts deliveries from the schedule (Redis sorted set `wh:{due}`): each instance claims what is due (a
 * claim lasts one attempt's bound and a margin, so the deliveries of an instance that dies come due again),
 * posts it signed through the egress policy, and records the outcome: delivered, a retry at the next step of
 * the backoff, or failed. Why a schedule in Redis and not JetStream's own redelivery delay: a delayed
 * message holds an ack-pending slot of its consumer, so one dead endpoint's thousands of retries would stall
 * every other endpoint's deliveries behind the consumer's max_ack_pending (docs/decisions).
 */
export class Deliverer {
  private inFlight = new Set<Promise<void>>();
  private running = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(private readonly o: DelivererOptions) {
    this.now = o.now ?? Date.now;
  }

  start(): void {
    this.running = true;
    this.loop = this.run();
  }

  /** Something became due now (a new event): look at once rather than at the next poll. */
  kick(): void {
    this.wake?.();
  }

  /** Stops claiming, and waits for the attempts in flight (within `boundMs`). */
  async stop(boundMs: number): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.inFlight]),
      new Promise((r) => (timer = setTimeout(r, boundMs))),
    ]);
    clearTimeout(timer);
  }

  private get claimMs() {
    return this.o.timeoutMs + 20_000;
  }

  private async run(): Promise<void> {
    while (this.running) {
      const free = this.o.concurrency - this.inFlight.size;
      let claimed: [string, string][] = [];
      if (free > 0) {
        try {
          const now = this.now();
          claimed = await this.o.store.claimDue(now, Math.min(free, 100), now + this.claimMs);
        } catch (err) {
          this.o.log.error({ err: safeError(err) }, 'webhook schedule unreadable');
        }
      }
      for (const [agentId, deliveryId] of claimed) {
        const p = this.attempt(agentId, deliveryId).catch((err: unknown) =>
          // the claim runs out and the delivery comes due again
          this.o.log.error({ err: safeError(err), agentId, deliveryId }, 'webhook attempt failed to record'),
        );
        this.inFlight.add(p);
        void p.finally(() => {
          this.inFlight.delete(p);
          this.wake?.();
        });
      }
      // a full batch may have more behind it; else wait for the poll, a new event or a free slot
      if (claimed.length > 0 && claimed.length === Math.min(free, 100)) continue;
      // stopped while claiming: no sleep to wake from
      if (!this.running) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.o.pollMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  /** One attempt of one delivery, as its claim holder. */
  async attempt(agentId: string, deliveryId: string): Promise<void> {
    const { store, log } = this.o;
    const metrics = webhooksMetrics();
    const rec = await store.getDelivery(agentId, deliveryId);
    if (!rec || rec.status !== 'pending') {
      if (rec) await this.settle(agentId, rec.webhookId, deliveryId);
      else await store.unschedule(agentId, deliveryId);
      return;
    }
    // its endpoint failed and goes one at a time, oldest first: this one's turn comes after the older ones
    if (await store.waitsBehind(rec, this.now(), WAIT_RECHECK_MS)) return;
    const endpoint = await store.getEndpoint(agentId, rec.webhookId);
    if (!endpoint || !endpoint.enabled) {
      const why = endpoint ? 'its endpoint is disabled' : 'its endpoint was deleted';
      await store.saveDelivery(finish(rec, 'cancelled', this.now(), why));
      await this.settle(agentId, rec.webhookId, deliveryId);
      metrics.attempts.inc({ outcome: 'cancelled' });
      return;
    }
    const started = this.now();
    if (rec.attempts === 0) {
      const event = JSON.parse(rec.body) as Pick<DomainEvent, 'at'>;
      metrics.latency.observe(Math.max(0, started - event.at) / 1000);
    }
    const result = await this.post(endpoint, rec, started);
    const now = this.now();
    const tried: DeliveryRecord = {
      ...rec,
      attempts: rec.attempts + 1,
      lastAttemptAt: started,
      ...('status' in result && result.status !== undefined ? { lastStatus: result.status } : {}),
    };
    if (result.kind === 'ok') {
      const { lastError: _e, ...clean } = tried;
      await store.saveDelivery(finish(clean, 'delivered', now));
      const was = await store.recordSuccess(agentId, endpoint.id);
      // it answers again: what waited behind this one goes now, one at a time in the events' order
      await this.settle(agentId, rec.webhookId, deliveryId);
      metrics.attempts.inc({ outcome: 'delivered' });
      if (was.wasFailing) log.info({ agentId, webhookId: endpoint.id }, 'webhook endpoint recovered');
      return;
    }
    const elapsed = now - rec.retryFrom;
    if (result.kind === 'retry' && elapsed < this.o.retry.forMs) {
      const delay = Math.min(
        this.o.retry.maxDelayMs,
        Math.max(retryDelayMs(this.o.retry, tried.attempts), result.retryAfterMs ?? 0),
      );
      await store.saveDelivery({ ...tried, lastError: result.error, nextAttemptAt: now + delay });
      await store.schedule(agentId, deliveryId, now + delay);
      metrics.attempts.inc({ outcome: 'retry' });
    } else {
      const error =
        result.kind === 'retry' ? `gave up after ${tried.attempts} attempts: ${result.error}` : result.error;
      await store.saveDelivery(finish(tried, 'failed', now, error));
      await this.settle(agentId, rec.webhookId, deliveryId);
      metrics.attempts.inc({ outcome: 'failed' });
      if (result.kind === 'retry') {
        log.warn(
          {
            code: 'WEBHOOK_DELIVERY_GAVE_UP',
            agentId,
            webhookId: endpoint.id,
            deliveryId,
            attempts: tried.attempts,
          },
          'webhook delivery gave up',
        );
      }
    }
    if (await store.recordFailure(agentId, endpoint.id, this.o.failingAfter, result.error, now)) {
      metrics.failing.inc();
      log.warn(
        { code: 'WEBHOOK_ENDPOINT_FAILING', agentId, webhookId: endpoint.id, lastError: result.error },
        'webhook endpoint failing',
      );
      await this.o
        .reportFailing(endpoint, result.error, now)
        .catch((err: unknown) =>
          log.error({ err: safeError(err), agentId, webhookId: endpoint.id }, 'webhook failing not reported'),
        );
    }
  }

  /** A delivery is over; the next in its endpoint's line, if it has one, is looked at now. */
  private async settle(agentId: string, webhookId: string, deliveryId: string): Promise<void> {
    if (await this.o.store.settle(agentId, webhookId, deliveryId, this.now())) this.kick();
  }

  /** POSTs the delivery's body, signed, through the egress policy; never follows a redirect. */
  private async post(endpoint: EndpointRecord, rec: DeliveryRecord, now: number): Promise<Attempt> {
    const checked = this.o.policy.checkUrl(endpoint.url);
    if (!checked.ok) return { kind: 'fail', error: `the URL ${checked.reason}` };
    const secrets = [this.o.box.unseal(endpoint.secret)];
    if (endpoint.previous && endpoint.previous.until > now)
      secrets.push(this.o.box.unseal(endpoint.previous.secret));
    try {
      // the name checked first, for a refusal that says why (undici reports the connect's own as "fetch failed")
      await this.o.hostCheck(endpoint.url);
      const res = await this.o.fetch(endpoint.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'vab-webhooks/1',
          [WebhookHeaders.signature]: signatureHeader(rec.body, secrets, now),
          [WebhookHeaders.deliveryId]: rec.id,
          [WebhookHeaders.eventType]: rec.eventType,
        },
        body: rec.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.o.timeoutMs),
      });
      // the answer's body is not read: only its status counts
      await res.body?.cancel().catch(() => undefined);
      const kind = outcomeOf(res.status);
      if (kind === 'ok') return { kind, status: res.status };
      const error =
        res.status >= 300 && res.status < 400
          ? `answered ${res.status} (a redirect, not followed)`
          : `answered ${res.status}`;
      return kind === 'retry'
        ? { kind, status: res.status, error, retryAfterMs: retryAfterMs(res.headers.get('retry-after'), now) }
        : { kind, status: res.status, error };
    } catch (err) {
      const refused = causeOf(err, EgressRefused);
      if (refused) {
        return {
          kind: 'fail',
          error: `refused by the egress policy: ${refused.host} resolves to a ${refused.range} address`,
        };
      }
      return { kind: 'retry', error: describeFailure(err) };
    }
  }
}

function causeOf<T extends Error>(err: unknown, type: new (...args: never[]) => T): T | undefined {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof type) return e;
  }
  return undefined;
}

/** A failed connection in words a builder can act on, without the library's internals. */
function describeFailure(err: unknown): string {
  if ((err as Error)?.name === 'TimeoutError') return 'no answer within the timeout';
  const cause = (err as { cause?: { code?: string } })?.cause;
  if (cause?.code) return `could not connect (${cause.code})`;
  return 'could not connect';
}
