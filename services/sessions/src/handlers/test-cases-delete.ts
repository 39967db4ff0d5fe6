import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Idempotent: deleting a case that is not there answers ok (an agent that is not there: 404). */
export const testCasesDelete =
  ({ testing, agents }: Deps): Handler<'sessions.test-cases.delete'> =>
  async (req, ctx) => {
    // a write to an archived agent's cases is refused as every other write to it is
    await agents.requireActive(req.agentId, ctx.requestId);
    await testing.deleteCase(req.agentId, req.caseId);
    ctx.log.info({ agentId: req.agentId, caseId: req.caseId }, 'test case deleted');
    return { ok: true as const };
  };
