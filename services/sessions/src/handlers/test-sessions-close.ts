import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testSessionsClose =
  ({ store }: Deps): Handler<'sessions.test-sessions.close'> =>
  async (req, ctx) => {
    const session = await store.closeSession(
      req.agentId,
      req.sessionId,
      req.close.endedAt,
      req.close.durationMs,
      req.report,
    );
    ctx.log.info({ agentId: req.agentId, sessionId: req.sessionId }, 'test session closed');
    return session;
  };
