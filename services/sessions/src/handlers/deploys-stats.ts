import type { Handler } from '@vab/bus';
import { deployStats } from '../analysis/deploy-stats.js';
import type { Deps } from '../deps.js';

/** A deploy's figures from its real calls (issue 47). */
export const deploysStats =
  ({ store, calls, agents }: Deps): Handler<'sessions.deploys.stats'> =>
  async (req, ctx) => {
    await agents.requireExisting(req.agentId, ctx.requestId);
    return deployStats(calls, await store.getDeploy(req.agentId, req.deployId));
  };
