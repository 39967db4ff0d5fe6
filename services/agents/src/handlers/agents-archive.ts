import type { Handler } from '@vab/bus';
import type { AgentStore } from '../store.js';

export const agentsArchive =
  (store: AgentStore): Handler<'agents.archive'> =>
  async (req, ctx) => {
    const result = await store.archive(req.id);
    ctx.log.info({ agentId: req.id }, 'agent archived');
    return result;
  };
