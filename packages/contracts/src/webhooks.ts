import { z } from 'zod';
import { EpochMs, Id } from './common.js';
import { DomainEventType } from './domain-events.js';

/** The events an endpoint may subscribe to (issue 47): every domain event but the internal ones. */
export const WebhookEventType = DomainEventType.exclude(['call.erased']);
export type WebhookEventType = z.infer<typeof WebhookEventType>;

/** A signing secret as a builder may choose one: long enough to resist guessing, printable. */
const SecretText = z
  .string()
  .min(24, 'must be at least 24 characters')
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces');

export const CreateWebhookBody = z
  .object({
    url: z.string().max(2000).url(),
    events: z.array(WebhookEventType).min(1).max(20),
    /** Absent: the service makes one (`whsec_…`), shown once in this answer. */
    secret: SecretText.optional(),
    description: z.string().max(200).optional(),
    enabled: z.boolean().default(true),
  })
  .strict();
export type CreateWebhookBody = z.infer<typeof CreateWebhookBody>;

export const UpdateWebhookBody = z
  .object({
    url: z.string().max(2000).url().optional(),
    events: z.array(WebhookEventType).min(1).max(20).optional(),
    description: z.string().max(200).optional(),
    /** Enabling again clears the endpoint's `failing` report. */
    enabled: z.boolean().optional(),
  })
  .strict();
export type UpdateWebhookBody = z.infer<typeof UpdateWebhookBody>;

/** New secret; the old one keeps signing beside it for `overlapSeconds` (default one day, 0: at once). */
export const RotateWebhookSecretBody = z
  .object({
    secret: SecretText.optional(),
    overlapSeconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 86_400)
      .default(86_400),
  })
  .strict();
export type RotateWebhookSecretBody = z.infer<typeof RotateWebhookSecretBody>;

/** Set while the endpoint keeps failing: since when, how many deliveries in a row, the last answer. */
export const WebhookFailing = z.object({
  since: EpochMs,
  consecutiveFailures: z.number().int().nonnegative(),
  lastError: z.string(),
});

export const Webhook = z.object({
  id: Id,
  agentId: Id,
  url: z.string(),
  events: z.array(WebhookEventType),
  description: z.string().optional(),
  enabled: z.boolean(),
  createdAt: EpochMs,
  updatedAt: EpochMs,
  /** The secret's last 4 characters, to tell secrets apart; the secret itself is shown once. */
  secretHint: z.string(),
  /** During a rotation's overlap: until when the previous secret still signs. */
  previousSecretUntil: EpochMs.optional(),
  failing: WebhookFailing.optional(),
});
export type Webhook = z.infer<typeof Webhook>;

export const WebhookList = z.array(Webhook);
export type WebhookList = z.infer<typeof WebhookList>;

/** The answer to a create and a rotation: the endpoint and its secret, the one time it is shown. */
export const WebhookWithSecret = Webhook.extend({ secret: z.string() });
export type WebhookWithSecret = z.infer<typeof WebhookWithSecret>;

export const WebhookParams = z.object({ id: Id, webhookId: Id });
export type WebhookParams = z.infer<typeof WebhookParams>;
export const DeliveryParams = WebhookParams.extend({ deliveryId: Id });
export type DeliveryParams = z.infer<typeof DeliveryParams>;

/**
 * `pending`: waiting for its next attempt; `delivered`: a 2xx; `failed`: a 4xx other than 408/429, a URL the
 * egress policy refuses, or retries exhausted; `cancelled`: its call was erased or its endpoint deleted.
 */
export const DeliveryStatus = z.enum(['pending', 'delivered', 'failed', 'cancelled']);
export type DeliveryStatus = z.infer<typeof DeliveryStatus>;

export const Delivery = z.object({
  /** Stable across attempts: the `Vab-Delivery-Id` header a receiver deduplicates on. */
  id: Id,
  webhookId: Id,
  eventId: Id,
  eventType: WebhookEventType,
  status: DeliveryStatus,
  attempts: z.number().int().nonnegative(),
  createdAt: EpochMs,
  /** When the next attempt is due, while `pending`. */
  nextAttemptAt: EpochMs.optional(),
  /** The last attempt: when, the receiver's HTTP status (absent: no answer), and what went wrong. */
  lastAttemptAt: EpochMs.optional(),
  lastStatus: z.number().int().optional(),
  lastError: z.string().optional(),
  deliveredAt: EpochMs.optional(),
});
export type Delivery = z.infer<typeof Delivery>;

export const DeliveryList = z.array(Delivery);
export type DeliveryList = z.infer<typeof DeliveryList>;

/** Headers of every delivery. The signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">[,v1=…]`. */
export const WebhookHeaders = {
  signature: 'Vab-Signature',
  deliveryId: 'Vab-Delivery-Id',
  eventType: 'Vab-Event-Type',
} as const;
