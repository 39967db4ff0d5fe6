import type { Handler } from '@vab/bus';
import type { TextSessions } from '../text-sessions.js';

export const textSessionTurn =
  (sessions: TextSessions): Handler<'playground.text.turn'> =>
  async (req, ctx) =>
    sessions.turn(req.agentId, req.sessionId, req.text, ctx.requestId);
