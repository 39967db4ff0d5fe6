import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const deploysList =
  ({ store, agents }: Deps): Handler<'sessions.deploys.list'> =>
  async (req, ctx) => {
    const deploys = await store.listDeploys(req.agentId);
    if (deploys) return deploys;
    await agents.requireExisting(req.agentId, ctx.requestId);
    return [];
  };
