import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';
import { subdomainBase } from '../subdomain.js';

export const deploysCreate =
  ({ store, agents }: Deps): Handler<'sessions.deploys.create'> =>
  async (req, ctx) => {
    const agent = await agents.requireActive(req.agentId, ctx.requestId);
    const deploy = await store.createDeploy(req.agentId, agent.version ?? 1, subdomainBase(agent.name ?? ''));
    ctx.log.info(
      { agentId: req.agentId, deployId: deploy.id, deployNumber: deploy.deployNumber },
      'deploy created',
    );
    return deploy;
  };
