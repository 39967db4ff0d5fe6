import type { Handler } from '@vab/bus';
import { AppError, type CaseResult } from '@vab/contracts';
import { randomUUID } from 'node:crypto';
import type { Deps } from '../deps.js';
import { queuedResult } from '../testing/runner.js';

export const testRunsCreate =
  ({ testing, agents, runner }: Deps): Handler<'sessions.runs.create'> =>
  async (req, ctx) => {
    const agent = await agents.requireActive(req.agentId, ctx.requestId);
    const latest = agent.version ?? 1;
    const version = req.body.version ?? latest;
    if (version !== latest) await agents.requireVersion(req.agentId, version, ctx.requestId);
    const ids = req.body.caseIds ?? (await testing.caseIds(req.agentId));
    const cases = await testing.casesById(req.agentId, ids);
    if (req.body.caseIds && cases.length < ids.length) {
      const found = new Set(cases.map((c) => c.id));
      throw new AppError('NOT_FOUND', `no test case ${ids.find((id) => !found.has(id))} on this agent`);
    }
    if (cases.length === 0) {
      throw new AppError('VALIDATION_FAILED', 'the agent has no test cases to run', {
        issues: [{ path: 'body.caseIds', message: 'no test cases' }],
      });
    }
    const now = Date.now();
    const id = randomUUID();
    const queued: CaseResult[] = cases.map(queuedResult);
    const run = await testing.createRun(
      {
        id,
        agentId: req.agentId,
        version,
        caseIds: cases.map((c) => c.id),
        createdAt: now,
        finishedAt: null,
      },
      queued,
      runner.deadline(),
    );
    runner.run({
      agentId: req.agentId,
      runId: id,
      version,
      cases,
      apiKeys: req.body.apiKeys,
      seed: req.body.seed,
      caller: ctx.caller,
    });
    ctx.log.info({ agentId: req.agentId, runId: id, version, cases: cases.length }, 'test run started');
    return run;
  };
