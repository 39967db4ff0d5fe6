import { safeError, type Logger } from '@vab/bus';
import { AppError, type DeployIssue } from '@vab/contracts';
import type { RedisClient } from '@vab/storage';
import { LockedSweep } from '../locked-sweep.js';
import type { SessionsStore } from '../store.js';
import type { CanaryJudge } from './canary.js';
import type { DomainEvents } from './domain-events.js';

/** One instance sweeps per interval: the others find the lock taken and skip. Its own slot on a cluster. */
const LOCK = 'ss:{deploys}:lock';
/** Index entries looked at per pass at most (the rest wait a pass). */
const BATCH = 200;

export const INTERRUPTED: DeployIssue = {
  code: 'INTERRUPTED',
  message: 'the deploy pipeline was interrupted; deploy again',
};

export interface DeploySweepSettings {
  /** How often (DEPLOY_SWEEP_INTERVAL_MS). */
  intervalMs: number;
  /** A pipeline deploy still pending/building this long after it was made lost its pipeline. */
  interruptedAfterMs: number;
}

/**
 * The deploy transitions no instance's memory may be trusted with, on a timer, from one instance at a time
 * (the store's indexes say where to look; no agent is scanned):
 * - a canary whose `canaryWindowMs` is over is promoted by the canary judge, even when its agent has no call
 *   and the instance that started it is gone;
 * - a deploy the pipeline was moving, still `pending` or `building` well past the readiness check's bound, is
 *   failed (`INTERRUPTED`) — its instance died mid-pipeline. Failed rather than resumed: the builder asked
 *   for it minutes ago, may have deployed again or changed the agent since, and a deploy going live long
 *   after, by itself, would replace what they now expect to be live; a clear failure says to deploy again.
 * Instances (and a late pipeline, a deployer's PATCH) racing on one deploy are settled by the store's
 * transitions: the loser gets ILLEGAL_TRANSITION and leaves it.
 */
export class DeploySweep {
  private readonly sweeper: LockedSweep;

  constructor(
    private readonly deps: {
      store: SessionsStore;
      canary: CanaryJudge;
      events: DomainEvents;
      redis: RedisClient;
      log: Logger;
    },
    private readonly settings: DeploySweepSettings,
  ) {
    const { redis, log } = deps;
    this.sweeper = new LockedSweep({
      redis,
      lock: LOCK,
      intervalMs: settings.intervalMs,
      lockMarginMs: Math.min(500, settings.intervalMs / 2),
      run: () => this.sweepOnce(Date.now()),
      failed: (err) => log.warn({ code: 'DEPLOY_SWEEP_FAILED', err: safeError(err) }, 'deploy sweep failed'),
    });
  }

  start(): void {
    this.sweeper.start();
  }

  stop(): Promise<void> {
    return this.sweeper.stop();
  }

  /** One sweep as of `now`, whoever holds the lock (tests, an operator's repair): how many deploys it moved. */
  sweep(now = Date.now()): Promise<number> {
    return this.sweeper.sweep(() => this.sweepOnce(now));
  }

  private async sweepOnce(now: number): Promise<number> {
    return (await this.promoteOver(now)) + (await this.failInterrupted(now));
  }

  private async promoteOver(now: number): Promise<number> {
    const { store, canary, log } = this.deps;
    let promoted = 0;
    for (const member of await store.canaryWindowsOver(now, BATCH)) {
      const [agentId, deployId] = member.split('/');
      if (!agentId || !deployId) {
        await store.forgetCanaryWindow(member);
        continue;
      }
      try {
        const deploy = await store.getDeploy(agentId, deployId);
        const since = deploy.liveAt ?? deploy.updatedAt;
        if (deploy.status === 'canary' && deploy.canaryWindowMs !== undefined) {
          // indexed as of just before its move: not over yet by the record, the next pass sees it
          if (now < since + deploy.canaryWindowMs) continue;
          const after = await canary.judge(agentId);
          if (after?.status === 'live') promoted++;
        }
        await store.forgetCanaryWindow(member);
      } catch (err) {
        if (err instanceof AppError && err.code === 'NOT_FOUND') await store.forgetCanaryWindow(member);
        else
          log.warn(
            { code: 'DEPLOY_SWEEP_FAILED', err: safeError(err), agentId, deployId },
            'deploy sweep could not promote a canary',
          );
      }
    }
    if (promoted > 0) log.info({ promoted }, 'canaries promoted after their window');
    return promoted;
  }

  private async failInterrupted(now: number): Promise<number> {
    const { store, events, log } = this.deps;
    let failed = 0;
    for (const member of await store.pipelineDeploysBefore(now - this.settings.interruptedAfterMs, BATCH)) {
      const [agentId, deployId] = member.split('/');
      if (!agentId || !deployId) {
        await store.forgetPipelineDeploy(member);
        continue;
      }
      try {
        const deploy = await store.getDeploy(agentId, deployId);
        if (deploy.status === 'pending' || deploy.status === 'building') {
          const moved = await store.updateDeploy(agentId, deployId, 'failed', undefined, {
            reason: INTERRUPTED.message,
            issues: [INTERRUPTED],
            at: now,
          });
          failed++;
          log.warn(
            { code: 'DEPLOY_INTERRUPTED', agentId, deployId, was: deploy.status },
            'deploy failed: its pipeline was interrupted',
          );
          await events.publish(agentId, 'deploy.failed', { deploy: moved });
        } else {
          // it moved on; only the index entry was left behind (a crash between its move and this)
          await store.forgetPipelineDeploy(member);
        }
      } catch (err) {
        if (err instanceof AppError && (err.code === 'NOT_FOUND' || err.code === 'ILLEGAL_TRANSITION'))
          await store.forgetPipelineDeploy(member);
        else
          log.warn(
            { code: 'DEPLOY_SWEEP_FAILED', err: safeError(err), agentId, deployId },
            'deploy sweep could not settle a deploy',
          );
      }
    }
    return failed;
  }
}
