import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, safeError, type BusClient, type Logger } from '@vab/bus';
import { AppError, Subjects, type DeployIssue, type DeployRecord } from '@vab/contracts';
import type { AgentsDirectory } from '../agents-directory.js';
import type { SessionsStore } from '../store.js';
import type { TestingStore } from '../testing/store.js';
import { offlineIfArchived } from './archived.js';
import { deployEventId, type DomainEvents } from './domain-events.js';
import { gateRefusal } from './gate.js';
import type { LiveDeploys } from './live-deploys.js';

/**
 * The deploy pipeline (issue 45): a deploy created by `POST …/deploys` moves by itself, `pending` → `building`
 * → the deploy gate → the readiness check of its pinned version as a public caller's start would run it (the
 * playground, with the agent's stored credentials and the server's keys under the key rule) → `live` (the
 * previous live one `superseded`, the KV bucket live-deploys written, `deploy.live` published) or `failed`
 * with the issues on the record (`deploy.failed`). A deploy with `trafficPercent` becomes a canary beside the
 * live one instead (decision 0035). It runs in the sessions instance that took the POST; an
 * external deployer's PATCH moves the same record through the same transitions (the store refuses a move
 * that is not one), so whichever moves it first wins and the other gets ILLEGAL_TRANSITION. When that
 * instance dies mid-way, the deploy sweep (live/deploy-sweep.ts) fails the deploy `INTERRUPTED` once the
 * readiness check's bound is well past. An agent archived while its deploy went live has it taken offline.
 */
export class DeployPipeline {
  private readonly bus: BusClient;
  private readonly running = new Set<Promise<void>>();

  constructor(
    nc: NatsConnection,
    private readonly deps: {
      store: SessionsStore;
      testing: TestingStore;
      liveDeploys: LiveDeploys;
      events: DomainEvents;
      agents: AgentsDirectory;
      log: Logger;
      checkTimeoutMs: number;
    },
  ) {
    this.bus = busClientOf(nc);
  }

  /** Starts moving a new deploy; the answer to the POST does not wait for it. */
  start(deploy: DeployRecord, requestId: string): void {
    const run = this.run(deploy, requestId).catch((err: unknown) => {
      const ids = { agentId: deploy.agentId, deployId: deploy.id };
      // moved meanwhile by someone else (the deploy sweep took this pipeline for a dead one, a deployer's
      // PATCH): theirs stands
      if (err instanceof AppError && err.code === 'ILLEGAL_TRANSITION')
        this.deps.log.info({ ...ids, err: safeError(err) }, 'deploy moved by another meanwhile');
      else
        this.deps.log.warn(
          { code: 'DEPLOY_PIPELINE_FAILED', err: safeError(err), ...ids },
          'deploy pipeline failed',
        );
    });
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }

  /** Waits for the deploys being moved (a stop drains them). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }

  private async run(deploy: DeployRecord, requestId: string): Promise<void> {
    const { store, testing, log } = this.deps;
    const { agentId, id: deployId, version } = deploy;
    await store.updateDeploy(agentId, deployId, 'building');
    let issues: DeployIssue[] = [];
    let reason: string | null = null;
    try {
      const refusal = await gateRefusal(testing, agentId, version);
      if (refusal) {
        reason = `the deploy gate is on: ${refusal}`;
        issues = [{ code: 'TESTS_NOT_PASSED', message: refusal }];
      } else {
        const checked = await this.bus.request(
          Subjects.deployCheck,
          { agentId, version },
          { timeoutMs: this.deps.checkTimeoutMs, requestId },
        );
        if (!checked.ready) {
          reason = `version ${version} is not ready for callers`;
          issues = checked.issues;
        }
      }
    } catch (err) {
      reason = 'the readiness check could not run';
      const code = err instanceof AppError ? err.code : 'INTERNAL';
      issues = [{ code, message: err instanceof AppError ? err.message : 'internal error' }];
    }
    if (reason !== null) {
      const failed = await store.updateDeploy(agentId, deployId, 'failed', undefined, {
        reason,
        issues,
        at: Date.now(),
      });
      log.warn(
        { code: 'DEPLOY_FAILED', agentId, deployId, issues: issues.map((i) => i.code) },
        'deploy failed',
      );
      await this.announce(failed, 'deploy.failed');
      return;
    }
    if (deploy.trafficPercent !== undefined) {
      await this.goCanary(deploy, requestId);
      return;
    }
    const live = await store.updateDeploy(agentId, deployId, 'live');
    if (await this.archivedMeanwhile(agentId, requestId)) return;
    log.info({ agentId, deployId, version }, 'deploy live');
    await this.publishLive(live);
  }

  /** The agent was archived while its deploy went live: it is offline again (live/archived.ts). */
  private async archivedMeanwhile(agentId: string, requestId: string): Promise<boolean> {
    const refused = await offlineIfArchived(this.deps, agentId, requestId, this.deps.log);
    if (refused) this.deps.log.info({ agentId }, 'agent archived while its deploy went live');
    return refused !== null;
  }

  /**
   * A canary that passed the gate and the readiness check takes its share of new calls beside the live deploy
   * (decision 0035): `deploy.live` is published with its record (status `canary`); the bucket keeps the full
   * live deploy. Nothing live to run beside any more: it fails.
   */
  private async goCanary(deploy: DeployRecord, requestId: string): Promise<void> {
    const { store, log } = this.deps;
    const { agentId, id: deployId } = deploy;
    let canary: DeployRecord;
    try {
      canary = await store.updateDeploy(agentId, deployId, 'canary');
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'CONFLICT')) throw err;
      const failed = await store.updateDeploy(agentId, deployId, 'failed', undefined, {
        reason: err.message,
        issues: [{ code: 'NOTHING_LIVE', message: err.message }],
        at: Date.now(),
      });
      await this.announce(failed, 'deploy.failed');
      return;
    }
    if (await this.archivedMeanwhile(agentId, requestId)) return;
    log.info({ agentId, deployId, trafficPercent: canary.trafficPercent }, 'deploy canary');
    await this.announce(canary, 'deploy.live');
    // neither its judging nor its window's end is this instance's to remember (it may restart first): the
    // store indexed it before the move, and the deploy sweep judges it (live/deploy-sweep.ts), as does any
    // call's admission, end or analysis
  }

  /**
   * Broadcasts what is live (a deploy that went live by the pipeline or a PATCH, or new settings of the live
   * one): the KV bucket, and (`wentLive`) the domain event; false when that event could not be stored.
   */
  async publishLive(live: DeployRecord, wentLive = true): Promise<boolean> {
    await this.deps.liveDeploys
      .put(live)
      .catch((err: unknown) =>
        this.deps.log.warn(
          { code: 'LIVE_DEPLOYS_NOT_WRITTEN', err: safeError(err), agentId: live.agentId, deployId: live.id },
          'live deploy not written to its bucket',
        ),
      );
    return wentLive ? this.announce(live, 'deploy.live') : true;
  }

  /**
   * Publishes a deploy's move (its event id: the deploy and the status it reached, so a re-publish is one
   * event). Once the stream has it, the deploy leaves the pipeline's and the canaries' index (store.announced):
   * until then the deploy sweep sees it there and publishes it again (a crash between the move and this,
   * JetStream down). True once stored.
   */
  async announce(
    deploy: DeployRecord,
    type: 'deploy.live' | 'deploy.failed' | 'deploy.rolled_back',
    more: Record<string, unknown> = {},
  ): Promise<boolean> {
    const { agentId, id, status } = deploy;
    const stored = await this.deps.events.publish(
      agentId,
      type,
      { deploy, ...more },
      deployEventId(id, status),
    );
    if (stored) await this.deps.store.announced(agentId, id, status);
    return stored;
  }
}
