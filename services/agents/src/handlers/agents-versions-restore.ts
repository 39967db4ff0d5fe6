import type { Handler } from '@vab/bus';
import { Headers } from '@vab/contracts';
import type { AgentStore } from '../store.js';

export const agentsVersionsRestore =
  (store: AgentStore): Handler<'agents.versions.restore'> =>
  async (req, ctx) => {
    const { agent, etag } = await store.restore(req.id, req.version, req.ifMatch);
    ctx.setHeader(Headers.etag, etag);
    ctx.log.info({ agentId: req.id, restored: req.version, version: agent.version }, 'version restored');
    return agent;
  };
