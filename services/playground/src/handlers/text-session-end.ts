import type { Handler } from '@vab/bus';
import type { TextSessions } from '../text-sessions.js';

export const textSessionEnd =
  (sessions: TextSessions): Handler<'playground.text.end'> =>
  async (req, ctx) =>
    sessions.end(req.agentId, req.sessionId, ctx.requestId);
