import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** One call with its transcript. */
export const callsGet =
  ({ calls }: Deps): Handler<'sessions.calls.get'> =>
  async (req) =>
    calls.getWithMessages(req.agentId, req.callId);
