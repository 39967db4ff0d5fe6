import { z } from 'zod';
import { EpochMs, Id, subjectToken } from './common.js';

/**
 * Domain events (wave 5 design): what happened to an agent's calls and deploys, kept by JetStream in the stream
 * `DOMAIN_EVENTS` under `domain.<agentId>.<type>`. Publishers use a JetStream publish with the event's id as
 * the message id (the stream drops a duplicate within its window); the webhooks service, the analysis queue and
 * the canary judge read it with durable consumers of their own.
 */
export const DOMAIN_EVENTS_STREAM = 'DOMAIN_EVENTS';
export const DOMAIN_EVENTS_SUBJECT_PREFIX = 'domain';

export const DomainEventType = z.enum([
  'call.started',
  'call.ended',
  'call.analyzed',
  'call.erased',
  'deploy.live',
  'deploy.failed',
  'deploy.rolled_back',
  'test_run.finished',
  'webhook.failing',
]);
export type DomainEventType = z.infer<typeof DomainEventType>;

export const DomainEvent = z.object({
  /** Unique per event: the JetStream message id, and what a webhook receiver deduplicates on. */
  id: Id,
  type: DomainEventType,
  at: EpochMs,
  agentId: Id,
  /** The event's facts (a call's id and ended reason, a deploy's id and number, …): the type says which. */
  data: z.record(z.string(), z.unknown()),
});
export type DomainEvent = z.infer<typeof DomainEvent>;

/** Where an agent's event of one type is published: `domain.<agentId>.<type>` (the type's dots are tokens). */
export const domainEventSubject = (agentId: string, type: DomainEventType) =>
  `${DOMAIN_EVENTS_SUBJECT_PREFIX}.${subjectToken(agentId, 'an agent id')}.${type}`;
