import type { BusClient, Handler } from '@vab/bus';
import { ARCHIVED_AGENT_REASON, Subjects } from '@vab/contracts';
import type { AgentStore } from '../store.js';

/**
 * Archives an agent and takes its live deploy offline: an archived agent must answer no caller. The agent is
 * archived first, then the sessions service (which keeps deploys) stops what is live; a deploy it makes live
 * meanwhile reads the agent after writing and stops itself, so none stays live. When the deploy cannot be
 * stopped, the archive is undone and the error answered: nothing changed, and the archive may be asked again.
 */
export const agentsArchive =
  (store: AgentStore, bus: BusClient, timeoutMs: number): Handler<'agents.archive'> =>
  async (req, ctx) => {
    const archived = await store.archive(req.id);
    let stopped;
    try {
      stopped = await bus.request(
        Subjects.deploysStop,
        { agentId: req.id, reason: ARCHIVED_AGENT_REASON },
        { timeoutMs, requestId: ctx.requestId },
      );
    } catch (err) {
      // the answer is the stop's error whatever the undo does; an undo that fails too (Redis gone as well)
      // leaves the agent archived with its deploy live until a move of that deploy is asked, which the
      // sessions service refuses and stops it
      const undone = await store.unarchive(req.id, archived.archivedAt).then(
        () => true,
        (undo: unknown) => {
          ctx.log.error({ agentId: req.id, err: undo }, 'archive not undone');
          return false;
        },
      );
      if (undone) {
        ctx.log.warn(
          { code: 'ARCHIVE_UNDONE', agentId: req.id, err },
          'archive undone: the live deploy could not be stopped',
        );
      }
      throw err;
    }
    ctx.log.info({ agentId: req.id, stoppedDeployId: stopped.deploy?.id ?? null }, 'agent archived');
    return { ...archived, stoppedDeploy: stopped.deploy };
  };
