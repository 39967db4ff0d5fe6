import { safeError, type Logger } from '@vab/bus';
import { storage, type RedisClient } from '@vab/storage';
import { randomUUID } from 'node:crypto';
import { keys } from '../redis-keys.js';
import type { SessionsStore } from '../store.js';
import type { CallsStore } from './calls-store.js';

/** One instance backfills at a time: the others find the lock taken and leave it to that one. Own slot. */
const LOCK = 'ss:{deploys}:backfill-lock';
/**
 * Held this long, renewed before each agent (an instance that dies frees it within this; one that outlasts it
 * while recounting a busy canary's calls may have a second run beside it: the same idempotent work).
 */
const LOCK_MS = 60_000;
/** Agents asked of the subdomains hash per page (HSCAN COUNT), deploys read per round trip of one agent. */
const AGENTS = 100;
const DEPLOYS = 200;

const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

export interface BackfillCounts {
  /** Agents looked at (every agent ever deployed). */
  agents: number;
  /** Deploys read. */
  deploys: number;
  /** Index entries added: deploys left pending/building, and running canaries, that no index held. */
  indexed: number;
  /** Running canaries whose calls since they went canary were recounted for the judge. */
  recounted: number;
}

/**
 * The upgrade's backfill, run at each start of the sessions service (one instance at a time, a Redis lock):
 * what the deploy sweep's indexes would hold had they always existed. A deploy made before the pipeline's
 * index existed and left `pending`/`building` by a crash is indexed by its creation (the sweep fails it
 * `INTERRUPTED`); every running canary — with a window or not, made before canaries were indexed — is
 * indexed due at once (the sweep judges it, promotes it after its window); a running canary's calls since it
 * went canary are recounted for its judge (calls-store.ts seedCanaryFigures; a check that finds none does the
 * same): one made before calls were counted has figures, calls an instance of the previous version closed
 * during a rolling upgrade (it counts nothing) are counted, and the previous version's keys of its figures
 * (named by the canary) are deleted. One agent it cannot backfill is logged and left to the next start; the
 * others are backfilled all the same. Idempotent: an entry already there stays as it is
 * (ZADD NX), a recount sets each call's place from what is stored of it, so running it at every start costs
 * reads, and a recount of each running canary's calls. It needs no scan of the keyspace: the subdomains hash names every agent
 * ever deployed (HSCAN, a page at a time), and each agent's deploys are its `ss:{<agentId>}:dep` index, read
 * in the agent's slot (a cluster needs no scan per master). External deployers' deploys are theirs to move,
 * as ever.
 */
export class DeployBackfill {
  private stopped = false;
  private running: Promise<BackfillCounts | null> | undefined;

  constructor(
    private readonly deps: {
      store: SessionsStore;
      calls: CallsStore;
      redis: RedisClient;
      log: Logger;
    },
  ) {}

  /** Starts it in the background (a failure is logged; the next start runs it again). */
  start(): void {
    void this.run().catch((err: unknown) =>
      this.deps.log.warn(
        { code: 'DEPLOY_BACKFILL_FAILED', err: safeError(err) },
        'deploy backfill failed; the next start runs it again',
      ),
    );
  }

  /** Stops it between two agents; resolves once it has. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running?.catch(() => null);
  }

  /** Runs it now (a test, the start): what it did, or null when another instance holds the lock. */
  run(now = Date.now()): Promise<BackfillCounts | null> {
    this.running ??= this.backfill(now).finally(() => (this.running = undefined));
    return this.running;
  }

  private async backfill(now: number): Promise<BackfillCounts | null> {
    const { store, redis, log } = this.deps;
    const token = randomUUID();
    if ((await storage(() => redis.set(LOCK, token, 'PX', LOCK_MS, 'NX'))) !== 'OK') return null;
    const counts: BackfillCounts = { agents: 0, deploys: 0, indexed: 0, recounted: 0 };
    try {
      let cursor = '0';
      do {
        const page = await store.deployedAgentsPage(cursor, AGENTS);
        cursor = page.cursor;
        for (const agentId of page.agentIds) {
          if (this.stopped) return counts;
          // renewed before each agent, not each page: a page of agents with busy canaries to recount could
          // outlast the lock, and the next start would stop at the same page again
          if (!(await this.renewed(token, counts))) return counts;
          try {
            await this.agent(agentId, now, counts);
          } catch (err) {
            // one agent's failure (a record it cannot read, Redis a moment away) stops none of the others;
            // the next start tries it again
            log.warn(
              { code: 'DEPLOY_BACKFILL_AGENT_FAILED', err: safeError(err), agentId },
              'deploy backfill could not backfill an agent',
            );
          }
          counts.agents++;
        }
      } while (cursor !== '0');
      if (counts.indexed > 0 || counts.recounted > 0) log.info({ ...counts }, 'deploys backfilled');
      return counts;
    } finally {
      await storage(() => redis.eval(RELEASE, 1, LOCK, token)).catch(() => undefined);
    }
  }

  /**
   * The lock held a while longer; false when it lapsed (this run outlasted it): another instance may be running
   * it now, and this one would release that one's lock at its end; that one (or the next start) finishes.
   */
  private async renewed(token: string, counts: BackfillCounts): Promise<boolean> {
    const { redis, log } = this.deps;
    if ((await storage(() => redis.eval(RENEW, 1, LOCK, token, String(LOCK_MS)))) === 1) return true;
    log.warn({ code: 'DEPLOY_BACKFILL_LOCK_LOST', ...counts }, 'deploy backfill lost its lock; stopped');
    return false;
  }

  private async agent(agentId: string, now: number, counts: BackfillCounts): Promise<void> {
    const { store, calls } = this.deps;
    for (let from = 0; ; from += DEPLOYS) {
      const { read, states } = await store.deployStates(agentId, from, DEPLOYS);
      counts.deploys += states.length;
      const member = (id: string) => `${agentId}/${id}`;
      const pipeline = states
        .filter((d) => (d.status === 'pending' || d.status === 'building') && !d.external)
        .map((d) => ({ member: member(d.id), createdAt: d.createdAt }));
      const canaries = states.filter((d) => d.status === 'canary');
      counts.indexed += await store.indexDeploys(
        pipeline,
        canaries.map((d) => member(d.id)),
        now,
      );
      for (const { id } of canaries) {
        // the previous version's figures of it (keys named by the canary): no one reads them now
        await storage(() => this.deps.redis.del(...keys.legacyCanaryCountKeys(agentId, id)));
        const [canary, live] = await Promise.all([store.getDeploy(agentId, id), store.liveDeploy(agentId)]);
        if (canary.status !== 'canary' || !live) continue;
        const since = canary.liveAt ?? canary.updatedAt;
        if (await calls.seedCanaryFigures(agentId, { id, since, liveId: live.id })) counts.recounted++;
      }
      if (read < DEPLOYS) return;
    }
  }
}
