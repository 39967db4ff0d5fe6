import { AppError, type CanaryRollback, type CanarySide, type DeployRecord } from '@vab/contracts';
import { safeError, type Logger } from '@vab/bus';
import { randomUUID } from 'node:crypto';
import type { AgentsDirectory } from '../agents-directory.js';
import type { SessionsStore } from '../store.js';
import { offlineIfArchived } from './archived.js';
import type { CallsStore, CountedSide } from './calls-store.js';
import type { LiveDeploys } from './live-deploys.js';
import type { DeployPipeline } from './pipeline.js';

/** The one-sided 95 % bound of a standard normal: the canary rule's confidence (decision 0035). */
export const CANARY_Z = 1.645;

export interface CanaryRule {
  /** Judged calls (success rule) or timed calls (response rule) each side needs before either rule fires. */
  minCalls: number;
  /** The canary's median response may exceed the live one's by this much (ms) before it is rolled back. */
  maxSlowdownMs: number;
}

const round = (v: number, places = 4) => Math.round(v * 10 ** places) / 10 ** places;

const median = (values: number[]): number | null => {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(0.5 * sorted.length) - 1]!;
};

/**
 * The two-proportion z statistic of `a`'s success rate over `b`'s (pooled standard error); null when either
 * side has no judged call, 0 when the pooled rate is 0 or 1 (no difference to see).
 */
export function successZ(a: { judged: number; passed: number }, b: { judged: number; passed: number }) {
  if (a.judged === 0 || b.judged === 0) return null;
  const pooled = (a.passed + b.passed) / (a.judged + b.judged);
  const se = Math.sqrt(pooled * (1 - pooled) * (1 / a.judged + 1 / b.judged));
  if (se === 0) return 0;
  return round((a.passed / a.judged - b.passed / b.judged) / se, 3);
}

/**
 * The canary rule (decision 0035): with at least `minCalls` judged calls on each side, the canary is rolled
 * back when the live deploy's success rate is higher than the canary's beyond the one-sided 95 % bound
 * (z > 1.645); with at least `minCalls` timed calls on each side, when the canary's median response exceeds
 * the live one's by more than `maxSlowdownMs`. Null: keep it.
 */
export function canaryVerdict(
  canary: CanarySide,
  live: CanarySide,
  rule: CanaryRule,
): Omit<CanaryRollback, 'at'> | null {
  const z = successZ(live, canary);
  if (canary.judged >= rule.minCalls && live.judged >= rule.minCalls && z !== null && z > CANARY_Z) {
    return {
      rule: 'success_rate',
      reason:
        `success rate ${canary.successRate} over ${canary.judged} judged calls against the live deploy's ` +
        `${live.successRate} over ${live.judged}: worse beyond the one-sided 95 % bound (z = ${z})`,
      canary,
      live,
      z,
    };
  }
  if (
    canary.timed >= rule.minCalls &&
    live.timed >= rule.minCalls &&
    canary.responseP50Ms !== null &&
    live.responseP50Ms !== null &&
    canary.responseP50Ms - live.responseP50Ms > rule.maxSlowdownMs
  ) {
    return {
      rule: 'response_time',
      reason:
        `median response ${canary.responseP50Ms} ms over ${canary.timed} calls against the live deploy's ` +
        `${live.responseP50Ms} ms over ${live.timed}: slower by more than ${rule.maxSlowdownMs} ms`,
      canary,
      live,
      z,
    };
  }
  return null;
}

const sideOf = (deployId: string, c: CountedSide): CanarySide => ({
  deployId,
  judged: c.judged,
  passed: c.passed,
  successRate: c.judged > 0 ? round(c.passed / c.judged) : null,
  timed: c.timed,
  responseP50Ms: c.responseP50Ms,
});

/**
 * One side's figures from its calls started since the canary went canary, listed and read one by one (what the
 * judge did before the figures were counted: a canary not seeded yet, and the tests' reference).
 */
export async function listedSide(
  calls: CallsStore,
  deploy: DeployRecord,
  since: number,
): Promise<CanarySide> {
  let judged = 0;
  let passed = 0;
  const responses: number[] = [];
  let cursor: string | undefined;
  do {
    const page = await calls.list({
      agentId: deploy.agentId,
      deployId: deploy.id,
      from: since,
      limit: 100,
      ...(cursor ? { cursor } : {}),
    });
    for (const c of page.calls) {
      const success = c.analysis && 'success' in c.analysis ? c.analysis.success : null;
      if (success !== null) {
        judged++;
        if (success) passed++;
      }
      const p50 = c.figures?.responseMs?.p50;
      if (c.status === 'ended' && p50 !== undefined) responses.push(p50);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return sideOf(deploy.id, { judged, passed, timed: responses.length, responseP50Ms: median(responses) });
}

/**
 * Judges an agent's running canary against its live deploy (decision 0035) whenever one of their calls ends
 * or is analysed, and at each of the deploy sweep's passes over it (live/deploy-sweep.ts: every canary is
 * indexed, so a rollback the instance that ended the call died before is not lost), and promotes it once its
 * `canaryWindowMs` is over (then or at the sweep's next pass, for an agent without calls). A check reads the
 * figures the calls store keeps (calls-store.ts canaryFigures), not the calls. Checks of one agent run one at a time on
 * an instance (a check asked for meanwhile runs once after it); instances racing on one canary are settled by
 * the store's transitions (the first rollback or promotion wins, the other gets ILLEGAL_TRANSITION).
 */
export class CanaryJudge {
  private readonly running = new Map<string, { again: boolean; done: Promise<void> }>();

  constructor(
    private readonly deps: {
      store: SessionsStore;
      calls: CallsStore;
      pipeline: DeployPipeline;
      agents: AgentsDirectory;
      liveDeploys: LiveDeploys;
      log: Logger;
      rule: CanaryRule;
    },
  ) {}

  /** Asks for a check of the agent's canary; never the caller's failure (logged). */
  check(agentId: string): void {
    const current = this.running.get(agentId);
    if (current) {
      current.again = true;
      return;
    }
    const entry = { again: false, done: Promise.resolve() };
    entry.done = (async () => {
      do {
        entry.again = false;
        await this.judge(agentId).catch((err: unknown) =>
          this.deps.log.warn(
            { code: 'CANARY_CHECK_FAILED', err: safeError(err), agentId },
            'canary check failed',
          ),
        );
      } while (entry.again);
    })().finally(() => this.running.delete(agentId));
    this.running.set(agentId, entry);
  }

  /** Waits for the checks under way (a stop drains them). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.running.values()].map((e) => e.done));
  }

  /**
   * Both sides' figures: the counted ones (kept as the calls change, a few reads whatever their number). A
   * canary without them (it went canary before calls were counted, and the start's backfill has not seeded
   * it, or failed to) is seeded here, once — the same idempotent recount as the backfill's — rather than
   * having its calls listed at every check; its calls are listed only when that seeding did not give figures.
   */
  async sides(canary: DeployRecord, live: DeployRecord, since: number): Promise<[CanarySide, CanarySide]> {
    const { calls } = this.deps;
    let counted = await calls.canaryFigures(canary.agentId, canary.id);
    if (
      !counted &&
      (await calls.seedCanaryFigures(canary.agentId, { id: canary.id, since, liveId: live.id }))
    ) {
      counted = await calls.canaryFigures(canary.agentId, canary.id);
    }
    if (counted && counted.liveId === live.id) {
      return [sideOf(canary.id, counted.canary), sideOf(live.id, counted.live)];
    }
    return Promise.all([
      listedSide(this.deps.calls, canary, since),
      listedSide(this.deps.calls, live, since),
    ]);
  }

  /** Rolls the canary back, promotes it after its window, or leaves it; the canary's record as it ends. */
  async judge(agentId: string): Promise<DeployRecord | null> {
    const { store, log } = this.deps;
    const canary = await store.canaryDeploy(agentId);
    if (!canary) return null;
    const live = await store.liveDeploy(agentId);
    if (!live) return null;
    const since = canary.liveAt ?? canary.updatedAt;
    if (canary.canaryWindowMs !== undefined && Date.now() >= since + canary.canaryWindowMs) {
      return this.promote(agentId, canary.id, 'window').catch((err: unknown) => {
        // archived meanwhile: the promotion took it offline with the rest of the agent's deploys
        if (err instanceof AppError && err.code === 'AGENT_ARCHIVED') return null;
        return ignoreLostRace(err);
      });
    }
    const [c, l] = await this.sides(canary, live, since);
    const verdict = canaryVerdict(c, l, this.deps.rule);
    if (!verdict) return canary;
    let rolled: DeployRecord;
    try {
      rolled = await store.updateDeploy(agentId, canary.id, 'rolled_back', undefined, undefined, {
        ...verdict,
        at: Date.now(),
      });
    } catch (err) {
      return ignoreLostRace(err);
    }
    if (rolled.status !== 'rolled_back' || rolled.rollback === undefined) return rolled;
    log.info(
      { agentId, deployId: canary.id, liveDeployId: live.id, rule: verdict.rule, z: verdict.z },
      'canary rolled back',
    );
    await this.deps.pipeline.announce(rolled, 'deploy.rolled_back', { live });
    return rolled;
  }

  /**
   * The canary becomes the full live deploy (the previous one superseded): `deploy.live` is published. An
   * agent archived while it was promoted has it taken offline at once (AGENT_ARCHIVED), as a PATCH to live.
   */
  async promote(
    agentId: string,
    deployId: string,
    by: 'hand' | 'window',
    requestId: string = randomUUID(),
  ): Promise<DeployRecord> {
    const { store, log } = this.deps;
    const deploy = await store.getDeploy(agentId, deployId);
    if (deploy.status !== 'canary')
      throw new AppError('ILLEGAL_TRANSITION', `a ${deploy.status} deploy cannot be promoted: only a canary`);
    const live = await store.updateDeploy(agentId, deployId, 'live', undefined, undefined, {
      at: Date.now(),
      by,
    });
    const refused = await offlineIfArchived(this.deps, agentId, requestId, log);
    if (refused) throw refused;
    log.info({ agentId, deployId, by }, 'canary promoted');
    await this.deps.pipeline.publishLive(live);
    return live;
  }
}

/** Another instance (or the builder) settled the canary first: nothing to do. */
function ignoreLostRace(err: unknown): null {
  if (err instanceof AppError && err.code === 'ILLEGAL_TRANSITION') return null;
  throw err;
}
