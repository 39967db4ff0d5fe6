import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testSessionsCreate =
  ({ store, agents }: Deps): Handler<'sessions.test-sessions.create'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    const session = await store.createSession(
      req.agentId,
      req.session.sessionType,
      req.session.roomName,
      req.session.version ?? null,
    );
    ctx.log.info(
      { agentId: req.agentId, sessionId: session.id, sessionType: session.sessionType },
      'test session opened',
    );
    return session;
  };
