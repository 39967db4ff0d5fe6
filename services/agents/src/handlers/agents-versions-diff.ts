import type { Handler } from '@vab/bus';
import { diffFlows } from '../diff.js';
import type { AgentStore } from '../store.js';

export const agentsVersionsDiff =
  (store: AgentStore): Handler<'agents.versions.diff'> =>
  async (req) => {
    const [a, b] = await Promise.all([store.version(req.id, req.a), store.version(req.id, req.b)]);
    return diffFlows(req.id, req.a, req.b, a.flow, b.flow, req.canvas);
  };
