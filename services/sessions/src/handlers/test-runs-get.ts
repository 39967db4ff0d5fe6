import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testRunsGet =
  ({ testing }: Deps): Handler<'sessions.runs.get'> =>
  (req) =>
    testing.getRun(req.agentId, req.runId);
