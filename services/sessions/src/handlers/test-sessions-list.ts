import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testSessionsList =
  ({ store, agents }: Deps): Handler<'sessions.test-sessions.list'> =>
  async (req, ctx) =>
    agents.listOrNotFound(req.agentId, ctx.requestId, await store.listSessions(req.agentId), []);
