import type { Handler } from '@vab/bus';
import { AppError } from '@vab/contracts';
import type { Deps } from '../deps.js';
import { statsOf } from '../stats/histogram.js';
import { dayOf } from '../store.js';

const DAY_MS = 86_400_000;
/** Without `since`: the last week. */
const DEFAULT_DAYS = 7;

/** `since` as epoch ms or an ISO date, rounded down to its UTC day; no further back than `maxDays`. */
export function daysSince(
  since: string | undefined,
  now: number,
  maxDays: number,
): { from: number; days: string[] } {
  let at = now - (DEFAULT_DAYS - 1) * DAY_MS;
  if (since !== undefined) {
    at = /^\d{1,15}$/.test(since) ? Number(since) : Date.parse(since);
    if (!Number.isFinite(at) || at < 0) {
      throw new AppError('VALIDATION_FAILED', 'since must be epoch milliseconds or an ISO date', {
        issues: [{ path: 'query.since', message: 'must be epoch milliseconds or an ISO date' }],
      });
    }
  }
  const today = Math.floor(now / DAY_MS);
  const first = Math.max(Math.min(Math.floor(at / DAY_MS), today), today - maxDays + 1);
  const days: string[] = [];
  for (let d = first; d <= today; d++) days.push(dayOf(d * DAY_MS));
  return { from: first * DAY_MS, days };
}

/** Every version's (and drafts') figures since a day: one stats hash per day, merged. */
export const statsAgent =
  ({ store, agents, statsMaxDays }: Deps): Handler<'sessions.stats.agent'> =>
  async (req, ctx) => {
    const { from, days } = daysSince(req.since, Date.now(), statsMaxDays);
    const fields = await store.statsFields(req.agentId, { days });
    if (fields.size === 0) await agents.requireExisting(req.agentId, ctx.requestId);
    return statsOf(fields, { agentId: req.agentId, version: null, since: from });
  };
