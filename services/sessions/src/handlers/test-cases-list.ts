import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testCasesList =
  ({ testing, agents }: Deps): Handler<'sessions.test-cases.list'> =>
  async (req, ctx) =>
    agents.listOrNotFound(req.agentId, ctx.requestId, await testing.listCases(req.agentId), []);
