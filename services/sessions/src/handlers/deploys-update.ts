import type { Handler } from '@vab/bus';
import { AppError, ARCHIVED_AGENT_REASON } from '@vab/contracts';
import type { Deps } from '../deps.js';

export const deploysUpdate =
  ({ store, testing, agents }: Deps): Handler<'sessions.deploys.update'> =>
  async (req, ctx) => {
    const { status, override } = req.update;
    if (status === undefined) throw new AppError('VALIDATION_FAILED', 'status is required');
    // An archived agent answers no caller: none of its deploys moves towards live, and none stays live
    // (one an archive could not reach is taken offline here too).
    const archived = async () => {
      const stopped = await store.stopLiveDeploy(req.agentId, ARCHIVED_AGENT_REASON);
      if (stopped) ctx.log.info({ agentId: req.agentId, deployId: stopped.id }, 'deploy stopped');
      return new AppError('AGENT_ARCHIVED', `agent ${req.agentId} is archived: its deploys cannot go live`);
    };
    if (status !== 'failed' && (await agents.requireExisting(req.agentId, ctx.requestId)).archived) {
      throw await archived();
    }
    let gateOverride: { reason: string; at: number } | undefined;
    if (status === 'live' && (await testing.gate(req.agentId))) {
      const deploy = await store.getDeploy(req.agentId, req.deployId);
      // the newest finished run on the version this deploy pins decides
      const runs = (await testing.listRuns(req.agentId)) ?? [];
      const last = runs.find((r) => r.version === deploy.version && r.finishedAt !== null);
      // a run of some cases only does not vouch for the others: it must have run every case the agent has
      const ran = new Set(last?.cases.map((c) => c.caseId));
      const notRun = (await testing.caseIds(req.agentId)).filter((id) => !ran.has(id));
      if (deploy.status !== 'live' && (last?.status !== 'passed' || notRun.length > 0)) {
        const why = !last
          ? `no finished test run on version ${deploy.version}`
          : last.status !== 'passed'
            ? `test run ${last.id} on version ${deploy.version} ${last.status} (${last.counts.passed}/${last.counts.total} passed)`
            : `test run ${last.id} on version ${deploy.version} did not run ${notRun.length} of the agent's cases`;
        if (!override) throw new AppError('TESTS_NOT_PASSED', `the deploy gate is on: ${why}`);
        gateOverride = { reason: override.reason, at: Date.now() };
        ctx.log.warn(
          { code: 'DEPLOY_GATE_OVERRIDDEN', agentId: req.agentId, deployId: req.deployId, why },
          'deploy gate overridden',
        );
      }
    }
    const deploy = await store.updateDeploy(req.agentId, req.deployId, status, gateOverride);
    // The archive writes the agent's state, then stops what is live; this writes live, then reads the
    // agent's state: whichever comes second sees the other's write, so a deploy never stays live on an
    // agent archived while it went live.
    if (deploy.status === 'live' && (await agents.lookup(req.agentId, ctx.requestId)).archived) {
      throw await archived();
    }
    ctx.log.info(
      { agentId: req.agentId, deployId: req.deployId, status: deploy.status },
      'deploy status changed',
    );
    return deploy;
  };
