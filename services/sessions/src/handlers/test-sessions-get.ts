import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

// A session is stored under its agent's key, so finding it proves the agent exists: no lookup needed.
export const testSessionsGet =
  ({ store }: Deps): Handler<'sessions.test-sessions.get'> =>
  async (req) =>
    store.getSession(req.agentId, req.sessionId);
