import type { Handler } from '@vab/bus';
import { requireEndpoint, type HandlerDeps } from '../deps.js';
import { publicDelivery } from '../store.js';

/** The endpoint's newest 100 deliveries, newest first (never their bodies). */
export const webhookDeliveriesList =
  (deps: HandlerDeps): Handler<'webhooks.deliveries.list'> =>
  async ({ agentId, webhookId }) => {
    await requireEndpoint(deps, agentId, webhookId);
    return (await deps.store.listDeliveries(agentId, webhookId)).map(publicDelivery);
  };
