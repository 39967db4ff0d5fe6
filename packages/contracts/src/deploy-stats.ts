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
