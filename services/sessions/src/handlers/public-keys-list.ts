import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** The agent's publishable keys (revoked ones too), newest first. */
export const publicKeysList =
  ({ live, agents }: Deps): Handler<'sessions.public-keys.list'> =>
  async (req, ctx) => {
    await agents.requireExisting(req.agentId, ctx.requestId);
    return { keys: await live.listPublicKeys(req.agentId) };
  };
