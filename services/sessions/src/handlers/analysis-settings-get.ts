import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** The agent's analysis settings (the defaults, analysis off, until set). */
export const analysisSettingsGet =
  ({ analysisSettings, agents }: Deps): Handler<'sessions.analysis.settings.get'> =>
  async (req, ctx) => {
    await agents.requireExisting(req.agentId, ctx.requestId);
    return analysisSettings.get(req.agentId);
  };
