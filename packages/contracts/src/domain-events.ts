import { z } from 'zod';
import { EpochMs, Id, subjectToken } from './common.js';

/**
 * Domain events (issue 45; webhooks, canaries and analysis read them): a JetStream stream `DOMAIN_EVENTS` of
 * subjects `domain.<agentId>.<type>`. Publishers use a JetStream publish with `msgID` = the event's `id`, so a
 * retried publish is stored once.
 */
export const DOMAIN_EVENTS_STREAM = 'DOMAIN_EVENTS';
export const DOMAIN_EVENTS_SUBJECTS = 'domain.>';

export const DomainEventType = z.enum([
  'call.started',
  'call.ended',
  'call.analyzed',
  /** A call was erased: its events' pending webhook deliveries are cancelled (issue 47). */
  'call.erased',
  'deploy.live',
  'deploy.failed',
  'deploy.rolled_back',
  'test_run.finished',
  /** An endpoint kept failing (the webhooks service publishes it): `{ webhookId, url, lastError }`. */
  'webhook.failing',
]);
export type DomainEventType = z.infer<typeof DomainEventType>;

export const domainEventSubject = (agentId: string, type: DomainEventType) =>
  `domain.${subjectToken(agentId, 'an agent id')}.${type}`;

/**
 * One event. `data` by type: `call.started`/`call.ended` → `{ call: CallSummary }`; `deploy.live` /
 * `deploy.failed` → `{ deploy: DeployRecord }`; `deploy.rolled_back` → `{ deploy: DeployRecord, live: DeployRecord }`
 * (the canary, with its `rollback`, and the live deploy every new call goes to); `call.analyzed` → its analysis (issue 47); `call.erased` →
 * `{ callId }`. Never a credential. `id` is unique per event: what a webhook receiver deduplicates on.
 */
export const DomainEvent = z.object({
  id: Id,
  type: DomainEventType,
  at: EpochMs,
  agentId: Id,
  data: z.record(z.string(), z.unknown()),
});
export type DomainEvent = z.infer<typeof DomainEvent>;
