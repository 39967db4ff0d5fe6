import type { Handler } from '@vab/bus';
import { AppError } from '@vab/contracts';
import type { Deps } from '../deps.js';

/** The host stored the call's recording (object `<agentId>/<callId>.ogg` of the bucket recordings). */
export const callsRecording =
  ({ calls, recordings }: Deps): Handler<'sessions.calls.recording'> =>
  async (req) => {
    try {
      await calls.setRecording(req.agentId, req.callId, req.recording);
    } catch (err) {
      // erased (or swept) while its recording was being stored: the recording goes too
      if (err instanceof AppError && err.code === 'NOT_FOUND')
        await recordings.remove(req.agentId, [req.callId]);
      throw err;
    }
    return { ok: true };
  };
