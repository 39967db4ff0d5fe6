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
  'deploy.live',
  'deploy.failed',
]);
export type DomainEventType = z.infer<typeof DomainEventType>;

export const domainEventSubject = (agentId: string, type: DomainEventType) =>
  `domain.${subjectToken(agentId, 'an agent id')}.${type}`;

/**
 * One event. `data` by type: `call.started`/`call.ended` → `{ call: CallSummary }`; `deploy.live` /
 * `deploy.failed` → `{ deploy: DeployRecord }`; `call.analyzed` → its analysis (issue 47). Never a credential.
 */
export const DomainEvent = z.object({
  id: Id,
  type: DomainEventType,
  at: EpochMs,
  agentId: Id,
  data: z.record(z.string(), z.unknown()),
});
export type DomainEvent = z.infer<typeof DomainEvent>;
