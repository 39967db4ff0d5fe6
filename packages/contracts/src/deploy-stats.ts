import { z } from 'zod';
import { EndedReason } from './calls.js';
import { Id } from './common.js';
import { FigureStats, UsageTotals } from './metrics.js';

/**
 * `GET /api/agents/:id/deploys/:deployId/stats` (issue 47): a deploy's figures from its real calls (the
 * calls kept: retention and erasure take theirs with them).
 */
export const DeployStats = z.object({
  agentId: Id,
  deployId: Id,
  deployNumber: z.number().int().positive(),
  version: z.number().int().positive(),
  /** Every call of the deploy, `busy` refusals too. */
  calls: z.number().int().nonnegative(),
  /** Calls that connected and ended (not `busy`, not going on): what minutes, success and figures are of. */
  connected: z.number().int().nonnegative(),
  minutes: z.number().nonnegative(),
  endedReasons: z.partialRecord(EndedReason, z.number().int().nonnegative()),
  /** Calls with an analysis that judged criteria: passed (every one) and failed (one at least). */
  analysed: z.number().int().nonnegative(),
  passed: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  /** passed / (passed + failed); null before any. */
  successRate: z.number().min(0).max(1).nullable(),
  /** The caller's wait for the agent's answer, over every turn of the deploy's calls that measured it. */
  responseMs: FigureStats.nullable(),
  usage: z.array(UsageTotals),
});
export type DeployStats = z.infer<typeof DeployStats>;

export const DeployStatsRequest = z.object({ agentId: Id, deployId: Id });
export type DeployStatsRequest = z.infer<typeof DeployStatsRequest>;

/**
 * `GET /api/agents/:id/deploys/compare?deployIds=a,b` (issue 47): two deploys side by side, and b − a. No
 * `deployIds`: the running canary (b) against the live deploy (a).
 */
export const CompareDeploysQuery = z
  .object({
    deployIds: z
      .string()
      .regex(/^[^,]{1,100},[^,]{1,100}$/, 'must be two deploy ids: a,b')
      .optional(),
  })
  .strict();
export type CompareDeploysQuery = z.infer<typeof CompareDeploysQuery>;

export const CompareDeploysRequest = z.object({ agentId: Id, deployIds: z.tuple([Id, Id]).optional() });
export type CompareDeploysRequest = z.infer<typeof CompareDeploysRequest>;

export const DeployComparison = z.object({
  a: DeployStats,
  b: DeployStats,
  /** b − a; null where either side has no figure. */
  difference: z.object({
    calls: z.number().int(),
    minutes: z.number(),
    successRate: z.number().nullable(),
    responseP50Ms: z.number().nullable(),
    /**
     * The two-proportion z statistic of b's success rate against a's (positive: b does better); |z| > 1.645
     * is the one-sided 95 % bound the canary rule uses. null when either side has no judged call.
     */
    successZ: z.number().nullable(),
  }),
});
export type DeployComparison = z.infer<typeof DeployComparison>;
