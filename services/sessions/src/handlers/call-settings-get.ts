import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** The agent's call settings (retention, the public page). */
export const callSettingsGet =
  ({ live, agents }: Deps): Handler<'sessions.calls.settings.get'> =>
  async (req, ctx) => {
    await agents.requireExisting(req.agentId, ctx.requestId);
    return live.callSettings(req.agentId);
  };
