import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const deploysUpdate =
  ({ store }: Deps): Handler<'sessions.deploys.update'> =>
  async (req, ctx) => {
    const deploy = await store.updateDeploy(req.agentId, req.deployId, req.update.status);
    ctx.log.info(
      { agentId: req.agentId, deployId: req.deployId, status: deploy.status },
      'deploy status changed',
    );
    return deploy;
  };
