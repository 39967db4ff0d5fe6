import { safeError, type Logger } from '@vab/bus';
import { AppError, type DeployIssue, type DeployRecord } from '@vab/contracts';
import type { RedisClient } from '@vab/storage';
import { randomUUID } from 'node:crypto';
import type { AgentsDirectory } from '../agents-directory.js';
import { LockedSweep } from '../locked-sweep.js';
import type { SessionsStore } from '../store.js';
import type { CallsStore } from './calls-store.js';
import type { CanaryJudge } from './canary.js';
import { DeployBackfill } from './deploy-backfill.js';
import { offlineIfArchived } from './archived.js';
import type { LiveDeploys } from './live-deploys.js';
import type { DeployPipeline } from './pipeline.js';

/** One instance sweeps per interval: the others find the lock taken and skip. Its own slot on a cluster. */
const LOCK = 'ss:{deploys}:lock';
/** Index entries looked at per pass at most (the rest wait a pass). */
const BATCH = 200;
/**
 * Passes an entry whose settling failed waits before it is tried again: it leaves the head of its index, so
 * that a batch of failing entries never keeps the others from being looked at.
 */
const FAILED_BACKOFF_PASSES = 8;

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
 * - every running canary is judged by the canary judge each interval (`ss:{deploys}:canaries`, by when it is
 *   due): one worse than the live deploy is rolled back even when the instance that ended or analysed the
 *   call that tipped it died before it could, and one whose `canaryWindowMs` is over is promoted, even when
 *   its agent has no call and the instance that started it is gone;
 * - a deploy the pipeline was moving, still `pending` or `building` well past the readiness check's bound, is
 *   failed (`INTERRUPTED`) — its instance died mid-pipeline. Failed rather than resumed: the builder asked
 *   for it minutes ago, may have deployed again or changed the agent since, and a deploy going live long
 *   after, by itself, would replace what they now expect to be live; a clear failure says to deploy again.
 * - a move whose event a crash (or JetStream) lost — the index entry stays until the event is stored — has
 *   its event published again, with the same id (domain-events.ts: deployEventId).
 * Instances (and a late pipeline, a deployer's PATCH) racing on one deploy are settled by the store's
 * transitions: the loser gets ILLEGAL_TRANSITION and leaves it.
 */
export class DeploySweep {
  private readonly sweeper: LockedSweep;
  /** What an earlier version left out of the indexes, run at each start (live/deploy-backfill.ts). */
  readonly backfill: DeployBackfill;

  constructor(
    private readonly deps: {
      store: SessionsStore;
      calls: CallsStore;
      canary: CanaryJudge;
      pipeline: DeployPipeline;
      /** Asked before a live move is told again: an agent archived meanwhile has it taken offline instead. */
      agents: AgentsDirectory;
      liveDeploys: LiveDeploys;
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
    this.backfill = new DeployBackfill({ store: deps.store, calls: deps.calls, redis, log });
  }

  start(): void {
    this.sweeper.start();
    this.backfill.start();
  }

  async stop(): Promise<void> {
    await this.backfill.stop();
    await this.sweeper.stop();
  }

  /** One sweep as of `now`, whoever holds the lock (tests, an operator's repair): how many deploys it moved. */
  sweep(now = Date.now()): Promise<number> {
    return this.sweeper.sweep(() => this.sweepOnce(now));
  }

  private get backoffMs(): number {
    return FAILED_BACKOFF_PASSES * this.settings.intervalMs;
  }

  private async sweepOnce(now: number): Promise<number> {
    return (await this.judgeCanaries(now)) + (await this.failInterrupted(now));
  }

  /**
   * Each index entry of a pass: a failure is logged and the entry is tried again after a backoff (`later`:
   * moved down its index, past the entries due before it).
   */
  private async each(
    members: string[],
    settle: (agentId: string, deployId: string, member: string) => Promise<void>,
    forget: (member: string) => Promise<void>,
    later: (member: string) => Promise<void>,
  ): Promise<void> {
    for (const member of members) {
      const [agentId, deployId] = member.split('/');
      try {
        if (!agentId || !deployId) await forget(member);
        else await settle(agentId, deployId, member);
      } catch (err) {
        if (err instanceof AppError && err.code === 'NOT_FOUND') {
          await forget(member).catch((e: unknown) =>
            this.deps.log.warn(
              { code: 'DEPLOY_SWEEP_FAILED', err: safeError(e), agentId, deployId },
              'deploy sweep could not forget a deploy',
            ),
          );
        } else {
          this.deps.log.warn(
            { code: 'DEPLOY_SWEEP_FAILED', err: safeError(err), agentId, deployId },
            'deploy sweep could not settle a deploy',
          );
          await later(member).catch((e: unknown) =>
            this.deps.log.warn(
              { code: 'DEPLOY_SWEEP_FAILED', err: safeError(e), agentId, deployId },
              'deploy sweep could not put a deploy off',
            ),
          );
        }
      }
    }
  }

  /**
   * Canaries due: each judged (live/canary.ts: rolled back when worse, promoted once its window is over), else
   * judged again an interval later (its window's end at the latest); a settled one whose move was not
   * announced: announced.
   */
  private async judgeCanaries(now: number): Promise<number> {
    const { store, canary, log } = this.deps;
    await store.adoptLegacyWindows(now, BATCH);
    let promoted = 0;
    let rolledBack = 0;
    const due = await store.canariesDue(now, BATCH);
    // each entry is taken out only while it has the score read here: a move to canary landing meanwhile
    // (its entry written anew before its move) keeps the entry it made
    const scores = new Map(due.map((d) => [d.member, d.score]));
    const forget = (member: string) => store.forgetCanary(member, scores.get(member));
    await this.each(
      due.map((d) => d.member),
      async (agentId, deployId, member) => {
        const deploy = await store.getDeploy(agentId, deployId);
        if (deploy.status === 'pending' || deploy.status === 'building') {
          // indexed just before its move to canary: judged once it is one (failed instead: the pipeline's
          // index announces it, and this entry goes then). A move that never followed (refused, or its
          // instance died: the pipeline's index fails it; an external deployer asks again) leaves it here
          if (now - deploy.updatedAt > this.settings.interruptedAfterMs) await forget(member);
          else await store.judgeCanaryAt(member, now + this.settings.intervalMs);
          return;
        }
        if (deploy.status === 'canary') {
          // a promotion or a rollback announces itself, which takes it out of the index
          const after = await canary.judge(agentId);
          if (after?.id === deployId && after.status === 'live') promoted++;
          else if (after?.id === deployId && after.status === 'rolled_back') rolledBack++;
          else {
            const windowEnd =
              deploy.canaryWindowMs === undefined
                ? Infinity
                : (deploy.liveAt ?? deploy.updatedAt) + deploy.canaryWindowMs;
            await store.judgeCanaryAt(member, Math.min(windowEnd, now + this.settings.intervalMs));
          }
          return;
        }
        // only the ends a canary reaches are this index's to tell again (promoted, rolled back); any other
        // status (a refused move's leftover: live without a promotion, failed — the pipeline's index tells
        // those) is not, and a superseded or stopped one has nothing to tell
        const canaryEnd = (deploy.status === 'live' && deploy.promoted) || deploy.status === 'rolled_back';
        if (!canaryEnd || !(await this.announce(deploy))) await forget(member);
      },
      forget,
      (member) => store.judgeCanaryAt(member, now + this.backoffMs),
    );
    if (promoted > 0) log.info({ promoted }, 'canaries promoted after their window');
    if (rolledBack > 0) log.info({ rolledBack }, 'canaries rolled back by the deploy sweep');
    return promoted + rolledBack;
  }

  /**
   * The pipeline's deploys made more than `interruptedAfterMs` ago whose move was never announced: still
   * pending/building, failed `INTERRUPTED`; moved on, announced now.
   */
  private async failInterrupted(now: number): Promise<number> {
    const { store, pipeline, log } = this.deps;
    let failed = 0;
    const members = await store.pipelineDeploysBefore(now - this.settings.interruptedAfterMs, BATCH);
    await this.each(
      members,
      async (agentId, deployId, member) => {
        const deploy = await store.getDeploy(agentId, deployId);
        if (deploy.status !== 'pending' && deploy.status !== 'building') {
          if (!(await this.announce(deploy))) await store.forgetPipelineDeploy(member);
          return;
        }
        let moved;
        try {
          moved = await store.updateDeploy(agentId, deployId, 'failed', undefined, {
            reason: INTERRUPTED.message,
            issues: [INTERRUPTED],
            at: now,
          });
        } catch (err) {
          // moved meanwhile (a late pipeline, another sweeper): the next pass announces it if need be
          if (err instanceof AppError && err.code === 'ILLEGAL_TRANSITION') return;
          throw err;
        }
        failed++;
        log.warn(
          { code: 'DEPLOY_INTERRUPTED', agentId, deployId, was: deploy.status },
          'deploy failed: its pipeline was interrupted',
        );
        await pipeline.announce(moved, 'deploy.failed');
      },
      (member) => store.forgetPipelineDeploy(member),
      // indexed by creation, read past the cutoff: looked at again once the backoff is over
      (member) => store.pipelineDeployAt(member, now - this.settings.interruptedAfterMs + this.backoffMs),
    );
    return failed;
  }

  /**
   * Publishes again the event of the status a deploy reached, whose announcement a crash (or JetStream)
   * lost; the same event id, so one that was stored after all is dropped by the stream's duplicate window.
   * Answers whether there was one to publish (superseded or stopped: what it reached was overtaken, and
   * telling it now would mislead).
   */
  private async announce(deploy: DeployRecord): Promise<boolean> {
    const { pipeline, store, log } = this.deps;
    const type =
      deploy.status === 'failed'
        ? 'deploy.failed'
        : deploy.status === 'live' || deploy.status === 'canary'
          ? 'deploy.live'
          : deploy.status === 'rolled_back'
            ? 'deploy.rolled_back'
            : null;
    if (!type) return false;
    const { agentId, id: deployId } = deploy;
    // its mover may have died before it checked the agent, as a move to live must (live/archived.ts)
    if (type === 'deploy.live' && (await offlineIfArchived(this.deps, agentId, randomUUID(), log)))
      return false;
    const more = type === 'deploy.rolled_back' ? { live: await store.liveDeploy(agentId) } : {};
    // a live one: the bucket live-deploys may have missed it too (its mover died before it); the same put
    const stored =
      deploy.status === 'live'
        ? await pipeline.publishLive(deploy)
        : await pipeline.announce(deploy, type, more);
    if (stored) log.info({ agentId, deployId, type }, 'deploy event published again');
    return true;
  }
}
