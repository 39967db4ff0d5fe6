import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testRunsList =
  ({ testing, agents }: Deps): Handler<'sessions.runs.list'> =>
  async (req, ctx) =>
    agents.listOrNotFound(req.agentId, ctx.requestId, await testing.listRunSummaries(req.agentId), []);
