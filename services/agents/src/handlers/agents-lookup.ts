import type { Handler } from '@vab/bus';
import type { AgentStore } from '../store.js';

/** Internal: lets other services check an agent exists without reading this service's keys. */
export const agentsLookup =
  (store: AgentStore): Handler<'agents.lookup'> =>
  async (req) =>
    store.lookup(req.id);
