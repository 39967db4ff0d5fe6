import type { Handler } from '@vab/bus';
import { requireEndpoint, type HandlerDeps } from '../deps.js';
import { publicWebhook } from '../store.js';

export const webhooksGet =
  (deps: HandlerDeps): Handler<'webhooks.endpoints.get'> =>
  async ({ agentId, webhookId }) => {
    const rec = await requireEndpoint(deps, agentId, webhookId);
    const failing = await deps.store.failingOf(agentId);
    return publicWebhook(rec, failing[webhookId], deps.now());
  };
