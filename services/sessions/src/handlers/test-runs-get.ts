import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** One answer's share of a run's stored case results: well under the bus's 8 MiB payload limit. */
export const RUN_PAGE_BYTES = 4 * 1024 * 1024;

export const testRunsGet =
  ({ testing }: Deps): Handler<'sessions.runs.get'> =>
  (req) =>
    testing.readRun(req.agentId, req.runId, req.casesFrom ?? 0, RUN_PAGE_BYTES);
