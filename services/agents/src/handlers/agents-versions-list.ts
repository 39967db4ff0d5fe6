import type { Handler } from '@vab/bus';
import type { AgentStore } from '../store.js';

export const agentsVersionsList =
  (store: AgentStore): Handler<'agents.versions.list'> =>
  async (req) =>
    store.versions(req.id);
