import type { Handler } from '@vab/bus';
import { AppError } from '@vab/contracts';
import { deployStats } from '../analysis/deploy-stats.js';
import type { Deps } from '../deps.js';
import { successZ } from '../live/canary.js';

const round = (v: number, places = 4) => Math.round(v * 10 ** places) / 10 ** places;

/**
 * Two deploys side by side (issue 47), and b − a: by default the running canary (b) against the live deploy
 * (a). Each side is its deploy's whole figures, as `…/deploys/:deployId/stats` answers them.
 */
export const deploysCompare =
  ({ store, calls, agents }: Deps): Handler<'sessions.deploys.compare'> =>
  async (req, ctx) => {
    await agents.requireExisting(req.agentId, ctx.requestId);
    let ids = req.deployIds;
    if (!ids) {
      const [live, canary] = await Promise.all([
        store.liveDeploy(req.agentId),
        store.canaryDeploy(req.agentId),
      ]);
      if (!live || !canary)
        throw new AppError('NOT_FOUND', 'no canary runs: name two deploys (deployIds=a,b)');
      ids = [live.id, canary.id];
    }
    const [a, b] = await Promise.all(
      ids.map(async (id) => deployStats(calls, await store.getDeploy(req.agentId, id))),
    );
    const diff = (x: number | null | undefined, y: number | null | undefined) =>
      x === null || x === undefined || y === null || y === undefined ? null : round(y - x);
    return {
      a: a!,
      b: b!,
      difference: {
        calls: b!.calls - a!.calls,
        minutes: round(b!.minutes - a!.minutes, 2),
        successRate: diff(a!.successRate, b!.successRate),
        responseP50Ms: diff(a!.responseMs?.p50, b!.responseMs?.p50),
        successZ: successZ(
          { judged: b!.passed + b!.failed, passed: b!.passed },
          { judged: a!.passed + a!.failed, passed: a!.passed },
        ),
      },
    };
  };
