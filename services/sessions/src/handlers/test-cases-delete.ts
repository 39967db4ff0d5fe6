import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Idempotent: deleting a case that is not there answers ok. */
export const testCasesDelete =
  ({ testing }: Deps): Handler<'sessions.cases.delete'> =>
  async (req, ctx) => {
    await testing.deleteCase(req.agentId, req.caseId);
    ctx.log.info({ agentId: req.agentId, caseId: req.caseId }, 'test case deleted');
    return { ok: true as const };
  };
