import type { Handler } from '@vab/bus';
import { checkUrl, requireEndpoint, type HandlerDeps } from '../deps.js';
import { publicWebhook } from '../store.js';

export const webhooksUpdate =
  (deps: HandlerDeps): Handler<'webhooks.endpoints.update'> =>
  async ({ agentId, webhookId, update }) => {
    if (update.url !== undefined) checkUrl(deps, update.url);
    const rec = await requireEndpoint(deps, agentId, webhookId);
    const next = {
      ...rec,
      ...(update.url !== undefined ? { url: update.url } : {}),
      ...(update.events !== undefined ? { events: [...new Set(update.events)] } : {}),
      ...(update.description !== undefined ? { description: update.description } : {}),
      ...(update.enabled !== undefined ? { enabled: update.enabled } : {}),
      updatedAt: deps.now(),
    };
    await deps.store.putEndpoint(next);
    // enabled again (or pointed elsewhere): the failing report is the old endpoint's
    if (update.enabled === true || update.url !== undefined)
      await deps.store.recordSuccess(agentId, webhookId);
    const failing = await deps.store.failingOf(agentId);
    return publicWebhook(next, failing[webhookId], deps.now());
  };
