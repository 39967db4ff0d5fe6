import type { Handler } from '@vab/bus';
import { hintOf, requireEndpoint, type HandlerDeps } from '../deps.js';
import { newSecret } from '../signing.js';
import { publicWebhook } from '../store.js';

/**
 * A new secret signs from now on; the one it replaces signs beside it until the overlap ends, so a receiver
 * can switch to the new one at its own pace (a delivery then carries two `v1=`). A rotation during an
 * overlap ends the older overlap: two secrets at most.
 */
export const webhooksRotate =
  (deps: HandlerDeps): Handler<'webhooks.endpoints.rotate'> =>
  async ({ agentId, webhookId, body }) => {
    const rec = await requireEndpoint(deps, agentId, webhookId);
    const secret = body.secret ?? newSecret();
    const now = deps.now();
    const next = {
      ...rec,
      secret: deps.box.seal(secret),
      secretHint: hintOf(secret),
      previous:
        body.overlapSeconds > 0 ? { secret: rec.secret, until: now + body.overlapSeconds * 1000 } : undefined,
      updatedAt: now,
    };
    await deps.store.putEndpoint(next);
    const failing = await deps.store.failingOf(agentId);
    return { ...publicWebhook(next, failing[webhookId], now), secret };
  };
