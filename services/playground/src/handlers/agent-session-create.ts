import type { Handler } from '@vab/bus';
import type { VoiceSessions } from '../voice/voice-sessions.js';

export const agentSessionCreate =
  (sessions: VoiceSessions): Handler<'playground.session.create'> =>
  async (req, ctx) =>
    sessions.create(req, ctx.requestId);
