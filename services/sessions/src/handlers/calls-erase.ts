import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * Erases a call, its transcript, its analysis and its recording (a caller's request to be forgotten);
 * `call.erased` tells the webhooks service to cancel the call's pending deliveries.
 */
export const callsErase =
  ({ calls, recordings, events }: Deps): Handler<'sessions.calls.erase'> =>
  async (req, ctx) => {
    const call = await calls.erase(req.agentId, req.callId);
    if (call.recording) await recordings.remove(req.agentId, [req.callId]);
    ctx.log.info({ agentId: req.agentId, callId: req.callId }, 'call erased');
    await events.publish(req.agentId, 'call.erased', { callId: req.callId });
    return { ok: true };
  };
