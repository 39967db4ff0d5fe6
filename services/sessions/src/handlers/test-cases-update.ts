import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';
import { checkMocks } from '../testing/case-checks.js';

export const testCasesUpdate =
  ({ testing, agents }: Deps): Handler<'sessions.test-cases.update'> =>
  async (req, ctx) => {
    // an unknown agent answers 404 and an archived one 409, as every write to it does
    await agents.requireActive(req.agentId, ctx.requestId);
    const current = await testing.getCase(req.agentId, req.caseId);
    const u = req.update;
    if (u.mocks) checkMocks(u.mocks, await agents.latestFlow(req.agentId, ctx.requestId), 'body');
    const updated = {
      ...current,
      ...(u.name !== undefined ? { name: u.name } : {}),
      // a case is scripted or simulated: a simulation replaces the turns, turns replace a simulation
      ...(u.simulation ? { simulation: u.simulation, turns: [] } : {}),
      ...(!u.simulation && u.turns?.length ? { turns: u.turns, simulation: null } : {}),
      ...(u.expect !== undefined ? { expect: u.expect } : {}),
      ...(u.temperature !== undefined ? { temperature: u.temperature } : {}),
      ...(u.mocks !== undefined ? { mocks: u.mocks } : {}),
      ...(u.criteria !== undefined ? { criteria: u.criteria } : {}),
      ...(u.judgeModel !== undefined ? { judgeModel: u.judgeModel } : {}),
      ...(u.repeat !== undefined ? { repeat: u.repeat } : {}),
      ...(u.minPassRate !== undefined ? { minPassRate: u.minPassRate } : {}),
      updatedAt: Date.now(),
    };
    await testing.putCase(updated);
    ctx.log.info({ agentId: req.agentId, caseId: req.caseId }, 'test case updated');
    return updated;
  };
