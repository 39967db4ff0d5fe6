import type { Handler } from '@vab/bus';
import { AppError } from '@vab/contracts';
import type { HandlerDeps } from '../deps.js';

/** Its pending deliveries are cancelled at their next attempt (the endpoint is gone). */
export const webhooksDelete =
  (deps: HandlerDeps): Handler<'webhooks.endpoints.delete'> =>
  async ({ agentId, webhookId }) => {
    if (!(await deps.store.deleteEndpoint(agentId, webhookId))) {
      throw new AppError('NOT_FOUND', `webhook ${webhookId} not found`);
    }
    return { ok: true };
  };
