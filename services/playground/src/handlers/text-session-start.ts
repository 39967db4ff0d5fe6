import type { Handler } from '@vab/bus';
import type { TextSessions } from '../text-sessions.js';

export const textSessionStart =
  (sessions: TextSessions): Handler<'playground.text.start'> =>
  async (req, ctx) =>
    sessions.start(req.agentId, req.body, ctx.requestId);
