import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  StorageType,
  type ConsumerMessages,
  type JsMsg,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamError, JetStreamApiCodes, safeError, type Logger } from '@vab/bus';
import { DOMAIN_EVENTS_STREAM, DOMAIN_EVENTS_SUBJECTS, DomainEvent, WebhookEventType } from '@vab/contracts';
import { createHash } from 'node:crypto';
import type { WebhookStore } from '../store.js';

/** The webhooks service's durable consumer of DOMAIN_EVENTS: one position shared by every instance. */
export const FANOUT_CONSUMER = 'webhooks-fanout';

const nanos = (ms: number) => ms * 1_000_000;

/** Events fanned out at once by one instance. */
const FANOUT_CONCURRENCY = 16;

export interface StreamSettings {
  maxAgeMs: number;
  replicas: number;
}

/**
 * DOMAIN_EVENTS as the publishers make it (calls, deploys): created here when no publisher has yet, left as
 * it is when it exists (its owner sets its limits).
 */
export async function ensureDomainEvents(nc: NatsConnection, s: StreamSettings): Promise<void> {
  const jsm = await jetstreamManager(nc);
  try {
    await jsm.streams.info(DOMAIN_EVENTS_STREAM);
  } catch (err) {
    if (!isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    await jsm.streams.add({
      name: DOMAIN_EVENTS_STREAM,
      subjects: [DOMAIN_EVENTS_SUBJECTS],
      storage: StorageType.File,
      max_age: nanos(s.maxAgeMs),
      num_replicas: s.replicas,
      // a publisher's retry of one event (same msgID) within this window is stored once
      duplicate_window: nanos(120_000),
    });
  }
  await jsm.consumers
    .add(DOMAIN_EVENTS_STREAM, {
      durable_name: FANOUT_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(30_000),
      max_ack_pending: 256,
    })
    .catch(async (err: unknown) => {
      // made already (another instance, an earlier release) with other settings: it is kept as it is
      await jsm.consumers.info(DOMAIN_EVENTS_STREAM, FANOUT_CONSUMER).catch(() => {
        throw err;
      });
    });
}

/** A delivery's id: the same for one event and one endpoint however often the event is read. */
export const deliveryIdOf = (eventId: string, webhookId: string) =>
  `d_${createHash('sha256').update(`${eventId}:${webhookId}`).digest('hex').slice(0, 32)}`;

const SUBSCRIBABLE = new Set<string>(WebhookEventType.options);

/**
 * Reads DOMAIN_EVENTS and turns each event into one delivery per endpoint of its agent that subscribed to its
 * type (and existed when it happened), stored and scheduled before the event is acknowledged: an instance
 * that dies between the two reads the event again and makes the same deliveries (same ids, stored once).
 */
export class Fanout {
  private messages: ConsumerMessages | undefined;
  private done: Promise<void> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly store: WebhookStore,
    private readonly log: Logger,
    private readonly onDue: () => void,
  ) {}

  async start(): Promise<void> {
    const consumer = await jetstream(this.nc).consumers.get(DOMAIN_EVENTS_STREAM, FANOUT_CONSUMER);
    this.messages = await consumer.consume({ max_messages: 64 });
    const messages = this.messages;
    this.done = (async () => {
      // a few events at once: each is a few Redis round trips, and one at a time they queued behind each other
      // (an event's delivery left seconds late under a burst on a loaded machine); the order an endpoint hears
      // them in comes from each event's stream sequence, not from when its delivery was made
      const inFlight = new Set<Promise<void>>();
      for await (const m of messages) {
        const p = this.handle(m).finally(() => inFlight.delete(p));
        inFlight.add(p);
        if (inFlight.size >= FANOUT_CONCURRENCY) await Promise.race(inFlight);
      }
      await Promise.all(inFlight);
    })();
  }

  async stop(): Promise<void> {
    await this.messages?.close();
    await this.done?.catch(() => undefined);
  }

  private async handle(m: JsMsg): Promise<void> {
    let event: DomainEvent;
    try {
      event = DomainEvent.parse(m.json());
    } catch {
      this.log.warn(
        { code: 'WEBHOOK_EVENT_UNREADABLE', subject: m.subject, seq: m.seq },
        'domain event unreadable',
      );
      m.term();
      return;
    }
    try {
      await this.fanOut(event, m.seq);
      m.ack();
    } catch (err) {
      this.log.error({ err: safeError(err), eventId: event.id }, 'domain event not fanned out');
      m.nak(1000);
    }
  }

  private async fanOut(event: DomainEvent, seq: number): Promise<void> {
    const callId = callIdOf(event);
    if (event.type === 'call.erased') {
      if (callId) await this.store.cancelCall(event.agentId, callId, Date.now());
      return;
    }
    if (!SUBSCRIBABLE.has(event.type)) return;
    const endpoints = await this.store.listEndpoints(event.agentId);
    const body = JSON.stringify(event);
    let created = 0;
    for (const ep of endpoints) {
      if (!ep.enabled || !ep.events.includes(event.type as WebhookEventType) || ep.createdAt > event.at)
        continue;
      // an endpoint's own failing report is not sent to it (it fails; the others hear of it)
      if (event.type === 'webhook.failing' && event.data.webhookId === ep.id) continue;
      const now = Date.now();
      const made = await this.store.createDelivery({
        id: deliveryIdOf(event.id, ep.id),
        agentId: event.agentId,
        webhookId: ep.id,
        eventId: event.id,
        eventType: event.type as WebhookEventType,
        status: 'pending',
        attempts: 0,
        createdAt: now,
        nextAttemptAt: now,
        retryFrom: now,
        seq,
        body,
        ...(callId ? { callId } : {}),
      });
      if (made) created++;
    }
    if (created > 0) this.onDue();
  }
}

/** The call an event is about: `data.call.id` (call.started, call.ended), or `data.callId` (the others). */
function callIdOf(event: DomainEvent): string | undefined {
  const call = event.data.call as { id?: unknown } | undefined;
  if (typeof call?.id === 'string') return call.id;
  return typeof event.data.callId === 'string' ? event.data.callId : undefined;
}
