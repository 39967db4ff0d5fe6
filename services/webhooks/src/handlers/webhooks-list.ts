import type { Handler } from '@vab/bus';
import { requireAgent, type HandlerDeps } from '../deps.js';
import { publicWebhook } from '../store.js';

export const webhooksList =
  (deps: HandlerDeps): Handler<'webhooks.endpoints.list'> =>
  async ({ agentId }, ctx) => {
    const [endpoints, failing] = await Promise.all([
      deps.store.listEndpoints(agentId),
      deps.store.failingOf(agentId),
    ]);
    // an agent with no endpoints may not exist at all: a 404 then, as for its other lists
    if (endpoints.length === 0) await requireAgent(deps, agentId, ctx.requestId, false);
    const now = deps.now();
    return endpoints.map((e) => publicWebhook(e, failing[e.id], now));
  };
