import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** One transcript message of a call (as a test session's), from its host. */
export const callsAppend =
  ({ calls, callLimits }: Deps): Handler<'sessions.calls.append'> =>
  async (req) => {
    await calls.append(req.agentId, req.callId, req.message, callLimits.maxMessages);
    return { ok: true };
  };
