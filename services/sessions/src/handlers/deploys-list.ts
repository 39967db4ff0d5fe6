import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const deploysList =
  ({ store, agents }: Deps): Handler<'sessions.deploys.list'> =>
  async (req, ctx) =>
    agents.listOrNotFound(req.agentId, ctx.requestId, await store.listDeploys(req.agentId), []);
