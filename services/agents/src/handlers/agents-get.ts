import type { Handler } from '@vab/bus';
import { Headers } from '@vab/contracts';
import type { AgentStore } from '../store.js';

export const agentsGet =
  (store: AgentStore): Handler<'agents.get'> =>
  async (req, ctx) => {
    const { agent, etag } = await store.get(req.id);
    ctx.setHeader(Headers.etag, etag);
    return agent;
  };
