import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Changes the agent's call settings (the fields sent). */
export const callSettingsSet =
  ({ live, agents }: Deps): Handler<'sessions.calls.settings.set'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    return live.setCallSettings(req.agentId, req.settings);
  };
