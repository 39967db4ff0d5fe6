import type { Handler } from '@vab/bus';
import type { AgentStore } from '../store.js';

export const agentsVersionsGet =
  (store: AgentStore): Handler<'agents.versions.get'> =>
  async (req) =>
    store.version(req.id, req.version);
