import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, encodeJson, serve, type HandlerTable, type Logger, type Served } from '@vab/bus';
import { domainEventSubject, type DomainEvent } from '@vab/contracts';
import {
  createEgressFetch,
  createHostCheck,
  EgressPolicy,
  type AllowEntry,
  type Resolver,
} from '@vab/egress';
import { idempotency, processMetrics, RedisIdempotencyStore, SecretBox } from '@vab/service-kit';
import type { RedisClient } from '@vab/storage';
import { createHash } from 'node:crypto';
import { Gauge } from 'prom-client';
import type { WebhooksConfig } from './config.js';
import type { RetryPolicy } from './backoff.js';
import type { HandlerDeps } from './deps.js';
import { Deliverer } from './delivery/deliverer.js';
import { ensureDomainEvents, Fanout } from './delivery/fanout.js';
import { webhookDeliveriesList } from './handlers/webhook-deliveries-list.js';
import { webhookDeliveriesRedeliver } from './handlers/webhook-deliveries-redeliver.js';
import { webhooksCreate } from './handlers/webhooks-create.js';
import { webhooksDelete } from './handlers/webhooks-delete.js';
import { webhooksGet } from './handlers/webhooks-get.js';
import { webhooksHealth } from './handlers/webhooks-health.js';
import { webhooksList } from './handlers/webhooks-list.js';
import { webhooksRotate } from './handlers/webhooks-rotate.js';
import { webhooksUpdate } from './handlers/webhooks-update.js';
import { WebhookStore, type EndpointRecord } from './store.js';

export function webhooksHandlers(deps: HandlerDeps, redis: RedisClient): HandlerTable<'webhooks'> {
  return {
    'webhooks.endpoints.create': webhooksCreate(deps),
    'webhooks.endpoints.list': webhooksList(deps),
    'webhooks.endpoints.get': webhooksGet(deps),
    'webhooks.endpoints.update': webhooksUpdate(deps),
    'webhooks.endpoints.delete': webhooksDelete(deps),
    'webhooks.endpoints.rotate': webhooksRotate(deps),
    'webhooks.deliveries.list': webhookDeliveriesList(deps),
    'webhooks.deliveries.redeliver': webhookDeliveriesRedeliver(deps),
    'webhooks.health': webhooksHealth(redis),
  };
}

/** The service's settings (`settingsOf` makes them from the config; tests and benches override some). */
export interface WebhooksSettings {
  secretsKey: Buffer;
  oldSecretsKeys?: Buffer[];
  egressAllow: AllowEntry[];
  timeoutMs: number;
  concurrency: number;
  retry: RetryPolicy;
  failingAfter: number;
  retentionDays: number;
  pollMs: number;
  stream: { maxAgeMs: number; replicas: number };
}

/** The service's settings from its config: what main.ts runs with, and what tests and benches start from. */
export function settingsOf(config: WebhooksConfig): WebhooksSettings {
  return {
    secretsKey: config.secretsKey,
    oldSecretsKeys: config.WEBHOOK_SECRETS_OLD_KEYS,
    egressAllow: config.WEBHOOK_EGRESS_ALLOW,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    concurrency: config.WEBHOOK_CONCURRENCY,
    retry: {
      firstMs: config.WEBHOOK_RETRY_FIRST_MS,
      maxDelayMs: config.WEBHOOK_RETRY_MAX_DELAY_MS,
      forMs: config.WEBHOOK_RETRY_FOR_MS,
    },
    failingAfter: config.WEBHOOK_FAILING_AFTER,
    retentionDays: config.WEBHOOK_DELIVERY_RETENTION_DAYS,
    pollMs: config.WEBHOOK_POLL_MS,
    stream: { maxAgeMs: config.DOMAIN_EVENTS_MAX_AGE_MS, replicas: config.DOMAIN_EVENTS_REPLICAS },
  };
}

export interface WebhooksServiceDeps {
  nc: NatsConnection;
  redis: RedisClient;
  log: Logger;
  settings: WebhooksSettings;
  /** How receivers' names resolve (tests answer what they need; default: the system's resolver). */
  resolve?: Resolver;
}

export interface WebhooksService extends Served {
  deliverer: Deliverer;
}

let backlogGauge: Gauge | undefined;
let backlogStore: WebhookStore | undefined;

/**
 * Serves the webhooks subjects, reads DOMAIN_EVENTS into deliveries, and delivers them; `main.ts` owns the
 * connections' lifecycle.
 */
export function startWebhooksService(deps: WebhooksServiceDeps): WebhooksService {
  const { nc, redis, log, settings } = deps;
  const store = new WebhookStore(
    redis,
    Math.max(settings.retentionDays * 86_400_000, settings.retry.forMs * 2),
  );
  const box = new SecretBox(settings.secretsKey, settings.oldSecretsKeys ?? []);
  const policy = new EgressPolicy(settings.egressAllow);
  const js = jetstream(nc);
  const reportFailing = async (ep: EndpointRecord, lastError: string, now: number) => {
    const event: DomainEvent = {
      // one report per endpoint and moment: a retried publish is stored once
      id: `wf_${createHash('sha256').update(`${ep.id}:${now}`).digest('hex').slice(0, 32)}`,
      type: 'webhook.failing',
      at: now,
      agentId: ep.agentId,
      data: { webhookId: ep.id, url: ep.url, lastError },
    };
    await js.publish(domainEventSubject(ep.agentId, event.type), encodeJson(event), { msgID: event.id });
  };
  const refusal = 'webhook' as const;
  const deliverer = new Deliverer({
    hostCheck: createHostCheck({ policy, log, resolve: deps.resolve, refusal }),
    store,
    box,
    policy,
    log,
    fetch: createEgressFetch({
      policy,
      timeoutMs: settings.timeoutMs,
      maxResponseBytes: 64 * 1024,
      log,
      resolve: deps.resolve,
      refusal,
    }),
    retry: settings.retry,
    timeoutMs: settings.timeoutMs,
    concurrency: settings.concurrency,
    pollMs: settings.pollMs,
    failingAfter: settings.failingAfter,
    reportFailing,
  });
  const handlerDeps: HandlerDeps = {
    store,
    box,
    bus: busClientOf(nc),
    policy,
    kick: () => deliverer.kick(),
    now: Date.now,
  };
  const served = serve(nc, {
    service: 'webhooks',
    handlers: webhooksHandlers(handlerDeps, redis),
    log,
    idempotency: idempotency(new RedisIdempotencyStore(redis, 'wh:idem:')),
  });
  const fanout = new Fanout(nc, store, log, () => deliverer.kick());
  // one gauge per process (tests run several instances): it reads the schedule of the latest one
  backlogStore = store;
  backlogGauge ??= new Gauge({
    name: 'webhook_deliveries_pending',
    help: 'Webhook deliveries waiting for an attempt (due or backing off), over every agent.',
    registers: [processMetrics().registry],
    async collect() {
      this.set((await backlogStore?.pendingCount().catch(() => 0)) ?? 0);
    },
  });
  const ready = (async () => {
    await served.ready;
    await ensureDomainEvents(nc, settings.stream);
    await fanout.start();
    deliverer.start();
    // the connection gone for good (a stop, or the process being torn down): no more claims from here
    void nc.closed().then(() => deliverer.stop(0));
  })();
  return {
    ...served,
    ready,
    deliverer,
    async stop(timeoutMs: number) {
      await ready.catch(() => undefined);
      await fanout.stop();
      await Promise.all([served.stop(timeoutMs), deliverer.stop(timeoutMs)]);
    },
  };
}
