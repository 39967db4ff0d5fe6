import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** The host reports a call's end (the first end stands): its slots are given back, `call.ended` published. */
export const callsEnd =
  ({ calls, events }: Deps): Handler<'sessions.calls.end'> =>
  async (req, ctx) => {
    const ended = await calls.end(req);
    if (ended) {
      ctx.log.info({ agentId: req.agentId, callId: req.callId, endedReason: req.endedReason }, 'call ended');
      await events.publish(req.agentId, 'call.ended', { call: ended });
    }
    return { ok: true };
  };
