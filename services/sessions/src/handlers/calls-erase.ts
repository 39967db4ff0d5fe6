import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * Erases a call, its transcript, its analysis, its recording and its live events (a caller's request to be
 * forgotten); `call.erased` tells the webhooks service to cancel the call's pending deliveries.
 */
export const callsErase =
  ({ calls, callErasure, events }: Deps): Handler<'sessions.calls.erase'> =>
  async (req, ctx) => {
    // the record as the erasure deleted it: a recording stored up to then is named, and removed
    const call = await calls.erase(req.agentId, req.callId);
    await callErasure.remove(req.agentId, [req.callId], call.recording ? [req.callId] : []);
    ctx.log.info({ agentId: req.agentId, callId: req.callId }, 'call erased');
    await events.publish(req.agentId, 'call.erased', { callId: req.callId });
    return { ok: true };
  };
