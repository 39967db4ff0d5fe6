import { RawJson, type Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const conversationsList =
  ({ store, agents }: Deps): Handler<'sessions.conversations.list'> =>
  async (req, ctx) =>
    agents.listOrNotFound(
      req.agentId,
      ctx.requestId,
      await store.listEntries(req.agentId),
      new RawJson('[]'),
    );
