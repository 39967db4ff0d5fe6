import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

export const testCasesUpdate =
  ({ testing, agents }: Deps): Handler<'sessions.cases.update'> =>
  async (req, ctx) => {
    // an unknown agent answers 404 and an archived one 409, as every write to it does
    await agents.requireActive(req.agentId, ctx.requestId);
    const current = await testing.getCase(req.agentId, req.caseId);
    const { name, turns, expect, temperature } = req.update;
    const updated = {
      ...current,
      ...(name !== undefined ? { name } : {}),
      ...(turns !== undefined ? { turns } : {}),
      ...(expect !== undefined ? { expect } : {}),
      ...(temperature !== undefined ? { temperature } : {}),
      updatedAt: Date.now(),
    };
    await testing.putCase(updated);
    ctx.log.info({ agentId: req.agentId, caseId: req.caseId }, 'test case updated');
    return updated;
  };
