import type { Handler } from '@vab/bus';
import { AppError, settingsOf } from '@vab/contracts';
import type { Deps } from '../deps.js';
import { offlineIfArchived, takeArchivedOffline } from '../live/archived.js';
import { gateRefusal } from '../live/gate.js';

/**
 * An external deployer's transitions (the spec's: pending → building → live | failed), and call settings
 * changes. The pipeline moves the deploys `POST` creates through the same transitions: whichever moves a
 * record first wins, the other gets ILLEGAL_TRANSITION (docs/api.md › Deploys).
 */
export const deploysUpdate =
  ({ store, testing, agents, pipeline, liveDeploys, canary }: Deps): Handler<'sessions.deploys.update'> =>
  async (req, ctx) => {
    const { status, override } = req.update;
    const settings = settingsOf(req.update);
    if (status === undefined && Object.keys(settings).length === 0) {
      throw new AppError('VALIDATION_FAILED', 'send a status or a call setting to change');
    }
    // An archived agent answers no caller: none of its deploys moves towards live, and none stays live
    // (one an archive could not reach is taken offline here too).
    if (status !== 'failed' && (await agents.requireExisting(req.agentId, ctx.requestId)).archived) {
      throw await takeArchivedOffline({ store, liveDeploys }, req.agentId, ctx.log);
    }
    let deploy = await store.getDeploy(req.agentId, req.deployId);
    if (Object.keys(settings).length > 0) {
      deploy = await store.setDeploySettings(req.agentId, req.deployId, settings);
      // calls started from now on use them, on every instance
      if (deploy.status === 'live' && status === undefined) await pipeline.publishLive(deploy, false);
    }
    if (status === undefined) return deploy;
    // decision 0035: `live` on a canary is its promotion (it passed the gate when it went canary); on a
    // building deploy with a share, its start as one
    if (status === 'live' && deploy.status === 'canary') {
      return canary.promote(req.agentId, req.deployId, 'hand', ctx.requestId);
    }
    let gateOverride: { reason: string; at: number } | undefined;
    if (status === 'live' && deploy.status !== 'live') {
      const why = await gateRefusal(testing, req.agentId, deploy.version);
      if (why !== null) {
        if (!override) throw new AppError('TESTS_NOT_PASSED', `the deploy gate is on: ${why}`);
        gateOverride = { reason: override.reason, at: Date.now() };
        ctx.log.warn(
          { code: 'DEPLOY_GATE_OVERRIDDEN', agentId: req.agentId, deployId: req.deployId, why },
          'deploy gate overridden',
        );
      }
    }
    const wasLive = deploy.status === 'live';
    const wasCanary = deploy.status === 'canary';
    const target = status === 'live' && deploy.trafficPercent !== undefined ? 'canary' : status;
    deploy = await store.updateDeploy(req.agentId, req.deployId, target, gateOverride);
    // an agent archived while it went live: offline again (live/archived.ts says why this order suffices)
    if (deploy.status === 'live' || deploy.status === 'canary') {
      const refused = await offlineIfArchived(
        { store, liveDeploys, agents },
        req.agentId,
        ctx.requestId,
        ctx.log,
      );
      if (refused) throw refused;
    }
    if (deploy.status === 'live') await pipeline.publishLive(deploy, !wasLive);
    if (deploy.status === 'canary' && !wasCanary) await pipeline.announce(deploy, 'deploy.live');
    // a deployer's own failure is theirs to tell (no event): nothing is left for the sweep to announce
    if (deploy.status === 'failed') await store.announced(req.agentId, req.deployId, 'failed');
    ctx.log.info(
      { agentId: req.agentId, deployId: req.deployId, status: deploy.status },
      'deploy status changed',
    );
    return deploy;
  };
