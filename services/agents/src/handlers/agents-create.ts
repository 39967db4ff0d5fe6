import type { Handler } from '@vab/bus';
import { EMPTY_FLOW, Headers } from '@vab/contracts';
import type { AgentStore } from '../store.js';

export const agentsCreate =
  (store: AgentStore): Handler<'agents.create'> =>
  async (req, ctx) => {
    const { agent, etag } = await store.create(req.name, req.flow ?? EMPTY_FLOW);
    ctx.setHeader(Headers.etag, etag);
    ctx.log.info({ agentId: agent.id }, 'agent created');
    return agent;
  };
