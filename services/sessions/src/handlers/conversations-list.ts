import { RawJson, type Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const conversationsList =
  ({ store, agents }: Deps): Handler<'sessions.conversations.list'> =>
  async (req, ctx) => {
    const entries = await store.listEntries(req.agentId);
    if (entries) return entries;
    // No history: the agent may still be unknown (404) or simply new ([]).
    await agents.requireExisting(req.agentId, ctx.requestId);
    return new RawJson('[]');
  };
