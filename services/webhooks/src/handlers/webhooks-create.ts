import type { Handler } from '@vab/bus';
import { AppError } from '@vab/contracts';
import { randomUUID } from 'node:crypto';
import { checkUrl, hintOf, MAX_ENDPOINTS_PER_AGENT, requireAgent, type HandlerDeps } from '../deps.js';
import { newSecret } from '../signing.js';
import { publicWebhook } from '../store.js';

export const webhooksCreate =
  (deps: HandlerDeps): Handler<'webhooks.endpoints.create'> =>
  async ({ agentId, body }, ctx) => {
    checkUrl(deps, body.url);
    await requireAgent(deps, agentId, ctx.requestId, true);
    if ((await deps.store.countEndpoints(agentId)) >= MAX_ENDPOINTS_PER_AGENT) {
      throw new AppError('LIMIT_EXCEEDED', `an agent has at most ${MAX_ENDPOINTS_PER_AGENT} webhooks`);
    }
    const secret = body.secret ?? newSecret();
    const now = deps.now();
    const rec = {
      id: randomUUID(),
      agentId,
      url: body.url,
      events: [...new Set(body.events)],
      ...(body.description !== undefined ? { description: body.description } : {}),
      enabled: body.enabled,
      createdAt: now,
      updatedAt: now,
      secret: deps.box.seal(secret),
      secretHint: hintOf(secret),
    };
    await deps.store.putEndpoint(rec);
    return { ...publicWebhook(rec, undefined, now), secret };
  };
