import { safeError, type BusClient, type Handler, type Logger } from '@vab/bus';
import { latencyChanges, Subjects, type AgentStats } from '@vab/contracts';
import { diffFlows } from '../diff.js';
import type { AgentStore } from '../store.js';

/** A figure's p50 per name, from a version's stats. */
const p50s = (s: AgentStats) =>
  Object.fromEntries(Object.entries(s.figures).map(([name, f]) => [name, f.p50]));

/**
 * What changed between two versions: the flow (here), and how their sessions' latency compares (asked of the
 * sessions service, which keeps the stats; left empty when it cannot answer in time).
 */
export const agentsVersionsDiff =
  (store: AgentStore, bus: BusClient, log: Logger, timeoutMs: number): Handler<'agents.versions.diff'> =>
  async (req, ctx) => {
    const [a, b] = await Promise.all([store.version(req.id, req.a), store.version(req.id, req.b)]);
    const diff = diffFlows(req.id, req.a, req.b, a.flow, b.flow, req.canvas);
    const opts = { timeoutMs, requestId: ctx.requestId };
    try {
      const [sa, sb] = await Promise.all([
        bus.request(Subjects.statsVersion, { agentId: req.id, version: req.a }, opts),
        bus.request(Subjects.statsVersion, { agentId: req.id, version: req.b }, opts),
      ]);
      diff.latency = latencyChanges(p50s(sa), p50s(sb));
    } catch (err) {
      log.warn(
        { code: 'VERSION_STATS_NOT_LOADED', err: safeError(err), agentId: req.id },
        'version stats for a diff not loaded',
      );
    }
    return diff;
  };
