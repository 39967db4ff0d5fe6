import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * `POST …/deploys/:deployId/promote` (decision 0035): a canary becomes the full live deploy at once on every
 * instance (the previous live one `superseded`, `deploy.live` published). Anything but a canary: 409; an
 * archived agent (before, or while it is promoted: then the deploy is taken offline): 409 AGENT_ARCHIVED.
 */
export const deploysPromote =
  ({ canary, agents }: Deps): Handler<'sessions.deploys.promote'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    // checked again after the write (CanaryJudge.promote): an archive meanwhile takes it offline
    return canary.promote(req.agentId, req.deployId, 'hand', ctx.requestId);
  };
