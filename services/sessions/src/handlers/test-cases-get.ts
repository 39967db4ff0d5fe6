import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testCasesGet =
  ({ testing }: Deps): Handler<'sessions.test-cases.get'> =>
  (req) =>
    testing.getCase(req.agentId, req.caseId);
