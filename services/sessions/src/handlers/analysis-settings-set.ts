import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Replaces the agent's analysis settings: calls analysed from now on (re-runs too) follow them. */
export const analysisSettingsSet =
  ({ analysisSettings, agents }: Deps): Handler<'sessions.analysis.settings.set'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    return analysisSettings.set(req.agentId, req.settings);
  };
