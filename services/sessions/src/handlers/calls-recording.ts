import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** The host stored the call's recording (object `<agentId>/<callId>.ogg` of the bucket recordings). */
export const callsRecording =
  ({ calls }: Deps): Handler<'sessions.calls.recording'> =>
  async (req) => {
    await calls.setRecording(req.agentId, req.callId, req.recording);
    return { ok: true };
  };
