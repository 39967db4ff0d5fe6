import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamError, JetStreamApiCodes, JetStreamApiError, safeError, type Logger } from '@vab/bus';
import {
  DOMAIN_EVENTS_STREAM,
  DOMAIN_EVENTS_SUBJECTS,
  domainEventSubject,
  type DomainEvent,
  type DomainEventType,
} from '@vab/contracts';
import { randomUUID } from 'node:crypto';

/**
 * A deploy transition's event id: the same however often the transition is announced, so JetStream's
 * duplicate window drops a re-publish of it (the deploy sweep's, after a crash between the move and its
 * event) and a webhook's delivery id, derived from it, stays one.
 */
export const deployEventId = (deployId: string, status: string) => `${deployId}_${status}`;

/**
 * Publishes domain events into the stream DOMAIN_EVENTS (made here when missing): a JetStream publish whose
 * message id is the event's id, so a retried publish is stored once. What reads them (webhooks) is durable.
 */
export class DomainEvents {
  private js: JetStreamClient | undefined;
  private ready: Promise<void> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    private readonly maxAgeMs = 7 * 86_400_000,
  ) {}

  private ensure(): Promise<void> {
    return (this.ready ??= (async () => {
      const jsm = await jetstreamManager(this.nc);
      const config = { subjects: [DOMAIN_EVENTS_SUBJECTS], max_age: this.maxAgeMs * 1_000_000 };
      try {
        await jsm.streams.info(DOMAIN_EVENTS_STREAM);
      } catch (err) {
        if (!isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) throw err;
        try {
          await jsm.streams.add({ name: DOMAIN_EVENTS_STREAM, ...config });
        } catch (e) {
          // another instance made it meanwhile (JetStream's "stream name already in use")
          if (!(e instanceof JetStreamApiError)) throw e;
        }
      }
      this.js = jetstream(this.nc);
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    }));
  }

  /**
   * Publishes one event (`id`: its id when the same event may be published again, else a new one); a failure
   * is logged (DOMAIN_EVENT_NOT_PUBLISHED), never the caller's failure. True once the stream stored it.
   */
  async publish(
    agentId: string,
    type: DomainEventType,
    data: Record<string, unknown>,
    id: string = randomUUID(),
  ): Promise<boolean> {
    const event: DomainEvent = { id, type, at: Date.now(), agentId, data };
    try {
      await this.ensure();
      await this.js!.publish(domainEventSubject(agentId, type), JSON.stringify(event), { msgID: event.id });
      return true;
    } catch (err) {
      this.log.warn(
        { code: 'DOMAIN_EVENT_NOT_PUBLISHED', err: safeError(err), agentId, type, eventId: event.id },
        'domain event not published',
      );
      return false;
    }
  }
}
