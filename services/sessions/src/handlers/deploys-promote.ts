import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * `POST …/deploys/:deployId/promote` (decision 0035): a canary becomes the full live deploy at once on every
 * instance (the previous live one `superseded`, `deploy.live` published). Anything but a canary: 409.
 */
export const deploysPromote =
  ({ canary, agents }: Deps): Handler<'sessions.deploys.promote'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    return canary.promote(req.agentId, req.deployId, 'hand');
  };
