import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testSessionsList =
  ({ store, agents }: Deps): Handler<'sessions.test.list'> =>
  async (req, ctx) => {
    const sessions = await store.listSessions(req.agentId);
    if (sessions) return sessions;
    await agents.requireExisting(req.agentId, ctx.requestId);
    return [];
  };
