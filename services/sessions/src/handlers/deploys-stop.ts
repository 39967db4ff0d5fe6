import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * Asked by the agents service when it archives an agent: an archived agent answers no caller, so its live
 * deploy goes offline, `stopped` with the reason, and leaves the bucket live-deploys. Nothing live: answers
 * null (a retried archive is safe).
 */
export const deploysStop =
  ({ store, liveDeploys }: Deps): Handler<'sessions.deploys.stop'> =>
  async (req, ctx) => {
    const deploy = await store.stopLiveDeploy(req.agentId, req.reason);
    if (deploy) {
      ctx.log.info({ agentId: req.agentId, deployId: deploy.id, reason: req.reason }, 'deploy stopped');
      await liveDeploys.remove(deploy.subdomain);
    }
    return { deploy };
  };
