import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testCasesGet =
  ({ testing }: Deps): Handler<'sessions.cases.get'> =>
  (req) =>
    testing.getCase(req.agentId, req.caseId);
