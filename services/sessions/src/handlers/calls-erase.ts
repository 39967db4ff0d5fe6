import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Erases a call, its transcript, its recording and its live events (a caller's request to be forgotten). */
export const callsErase =
  ({ calls, callErasure }: Deps): Handler<'sessions.calls.erase'> =>
  async (req, ctx) => {
    const call = await calls.erase(req.agentId, req.callId);
    await callErasure.remove(req.agentId, [req.callId], call.recording ? [req.callId] : []);
    ctx.log.info({ agentId: req.agentId, callId: req.callId }, 'call erased');
    return { ok: true };
  };
