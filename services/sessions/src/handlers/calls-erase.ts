import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Erases a call, its transcript and its recording (a caller's request to be forgotten). */
export const callsErase =
  ({ calls, recordings }: Deps): Handler<'sessions.calls.erase'> =>
  async (req, ctx) => {
    const call = await calls.erase(req.agentId, req.callId);
    if (call.recording) await recordings.remove(req.agentId, [req.callId]);
    ctx.log.info({ agentId: req.agentId, callId: req.callId }, 'call erased');
    return { ok: true };
  };
