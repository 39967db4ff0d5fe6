import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const conversationsAppend =
  ({ store, agents }: Deps): Handler<'sessions.conversations.append'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    return store.appendEntry(req.agentId, req.entry);
  };
