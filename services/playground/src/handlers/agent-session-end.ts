import type { Handler } from '@vab/bus';
import type { VoiceSessions } from '../voice/voice-sessions.js';

export const agentSessionEnd =
  (sessions: VoiceSessions): Handler<'playground.session.end'> =>
  async (req, ctx) =>
    sessions.end(req.roomName, ctx.requestId);
