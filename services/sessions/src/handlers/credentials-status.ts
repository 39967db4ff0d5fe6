import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Which providers have a stored key, with its last 4 characters: never a value. */
export const credentialsStatus =
  ({ live, agents }: Deps): Handler<'sessions.credentials.status'> =>
  async (req, ctx) => {
    await agents.requireExisting(req.agentId, ctx.requestId);
    return live.credentialStatus(req.agentId);
  };
