import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const messagesList =
  ({ store }: Deps): Handler<'sessions.messages.list'> =>
  async (req) =>
    store.listMessages(req.agentId, req.sessionId);
