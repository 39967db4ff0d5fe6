import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** The playground sealed the merged keys: kept as they are, with their status. */
export const credentialsStore =
  ({ live, agents }: Deps): Handler<'sessions.credentials.store'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    return live.storeCredentials(req);
  };
