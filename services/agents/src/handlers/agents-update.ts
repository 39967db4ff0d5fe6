import type { Handler } from '@vab/bus';
import { Headers } from '@vab/contracts';
import type { AgentStore } from '../store.js';

export const agentsUpdate =
  (store: AgentStore): Handler<'agents.update'> =>
  async (req, ctx) => {
    const { agent, etag } = await store.update(req.id, req.patch, req.ifMatch);
    ctx.setHeader(Headers.etag, etag);
    ctx.log.info({ agentId: agent.id, version: agent.version }, 'agent updated');
    return agent;
  };
