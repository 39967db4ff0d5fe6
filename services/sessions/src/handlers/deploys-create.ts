import type { Handler } from '@vab/bus';
import { AppError, DEFAULT_DEPLOY_SETTINGS, settingsOf } from '@vab/contracts';
import type { Deps } from '../deps.js';
import { subdomainBase } from '../subdomain.js';

/**
 * Records a deploy (`pending`) pinning `version` (default: the agent's current one; an older one is a
 * rollback) with its call settings, and starts the pipeline that moves it (live/pipeline.ts). With
 * `trafficPercent` it becomes a canary beside the live deploy (decision 0035).
 */
export const deploysCreate =
  ({ store, agents, pipeline }: Deps): Handler<'sessions.deploys.create'> =>
  async (req, ctx) => {
    const agent = await agents.requireActive(req.agentId, ctx.requestId);
    const current = agent.version ?? 1;
    const version = req.body.version ?? current;
    if (version > current) {
      throw new AppError('VALIDATION_FAILED', `version ${version} does not exist (the latest is ${current})`);
    }
    const settings = { ...DEFAULT_DEPLOY_SETTINGS, ...settingsOf(req.body) };
    const external = req.body.external === true;
    const { trafficPercent, canaryWindowMs } = req.body;
    // a canary runs beside the live deploy (decision 0035): refused at once when there is none (the pipeline
    // fails it too if the live one goes away meanwhile)
    if (trafficPercent !== undefined && !(await store.liveDeploy(req.agentId))) {
      throw new AppError('CONFLICT', 'nothing is live: a canary runs beside a live deploy, deploy one first');
    }
    const deploy = await store.createDeploy(
      req.agentId,
      version,
      subdomainBase(agent.name ?? ''),
      settings,
      external,
      { trafficPercent, canaryWindowMs },
    );
    ctx.log.info(
      {
        agentId: req.agentId,
        deployId: deploy.id,
        deployNumber: deploy.deployNumber,
        version,
        trafficPercent,
      },
      'deploy created',
    );
    if (!external) pipeline.start(deploy, ctx.requestId);
    return deploy;
  };
