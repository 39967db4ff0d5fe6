import type { Handler } from '@vab/bus';
import type { AgentStore } from '../store.js';

export const agentsList =
  (store: AgentStore): Handler<'agents.list'> =>
  async () =>
    store.list();
