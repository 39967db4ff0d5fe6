import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';
import { statsOf } from '../stats/histogram.js';

/** A version's figures, from its one stats hash (kept up to date as messages and closes are stored). */
export const statsVersion =
  ({ store, agents }: Deps): Handler<'sessions.stats.version'> =>
  async (req, ctx) => {
    const fields = await store.statsFields(req.agentId, { version: req.version });
    if (fields.size === 0) await agents.requireVersion(req.agentId, req.version, ctx.requestId);
    return statsOf(fields, { agentId: req.agentId, version: req.version, since: null });
  };
