import type { Handler } from '@vab/bus';
import { AppError } from '@vab/contracts';
import { requireEndpoint, type HandlerDeps } from '../deps.js';
import { publicDelivery } from '../store.js';

/**
 * Attempts a delivery again now, whatever it came to, with the same id (a receiver that has it deduplicates);
 * its retries start over from now. A delivery whose call was erased has nothing left to send.
 */
export const webhookDeliveriesRedeliver =
  (deps: HandlerDeps): Handler<'webhooks.deliveries.redeliver'> =>
  async ({ agentId, webhookId, deliveryId }) => {
    await requireEndpoint(deps, agentId, webhookId);
    const rec = await deps.store.getDelivery(agentId, deliveryId);
    if (!rec || rec.webhookId !== webhookId)
      throw new AppError('NOT_FOUND', `delivery ${deliveryId} not found`);
    if (rec.body === '') throw new AppError('CONFLICT', 'the delivery was erased with its call');
    const now = deps.now();
    const { deliveredAt: _d, ...rest } = rec;
    const next = { ...rest, status: 'pending' as const, nextAttemptAt: now, retryFrom: now };
    await deps.store.saveDelivery(next);
    await deps.store.reopen(next, now);
    deps.kick();
    return publicDelivery(next);
  };
