import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const deployGateGet =
  ({ testing, agents }: Deps): Handler<'sessions.deploys.gate.get'> =>
  async (req, ctx) => {
    await agents.requireExisting(req.agentId, ctx.requestId);
    return { enabled: await testing.gate(req.agentId) };
  };
