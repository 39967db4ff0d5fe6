import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testSessionsRecording =
  ({ store }: Deps): Handler<'sessions.test-sessions.recording'> =>
  async (req, ctx) => {
    const session = await store.setRecording(req.agentId, req.sessionId, req.recording);
    ctx.log.info(
      { agentId: req.agentId, sessionId: req.sessionId, bytes: req.recording.bytes },
      'recording stored',
    );
    return session;
  };
