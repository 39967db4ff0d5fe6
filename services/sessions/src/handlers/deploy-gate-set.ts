import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const deployGateSet =
  ({ testing, agents }: Deps): Handler<'sessions.deploys.gate.set'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    await testing.setGate(req.agentId, req.gate.enabled);
    ctx.log.info({ agentId: req.agentId, enabled: req.gate.enabled }, 'deploy gate set');
    return req.gate;
  };
