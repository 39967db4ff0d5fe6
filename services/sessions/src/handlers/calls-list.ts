import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** The agent's calls, newest first, filtered, a page at a time. */
export const callsList =
  ({ calls, agents }: Deps): Handler<'sessions.calls.list'> =>
  async (req, ctx) => {
    await agents.requireExisting(req.agentId, ctx.requestId);
    return calls.list(req);
  };
