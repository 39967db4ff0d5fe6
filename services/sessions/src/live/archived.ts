import type { Logger } from '@vab/bus';
import { AppError, ARCHIVED_AGENT_REASON } from '@vab/contracts';
import type { AgentsDirectory } from '../agents-directory.js';
import type { SessionsStore } from '../store.js';
import type { LiveDeploys } from './live-deploys.js';

export interface ArchivedDeps {
  store: SessionsStore;
  liveDeploys: LiveDeploys;
  agents: AgentsDirectory;
}

/**
 * An archived agent answers no caller: its live deploy (and canary) goes offline, `stopped` with the reason,
 * and leaves the bucket. Answers the error that refuses the move that found it archived.
 */
export async function takeArchivedOffline(
  { store, liveDeploys }: Omit<ArchivedDeps, 'agents'>,
  agentId: string,
  log: Logger,
): Promise<AppError> {
  const stopped = await store.stopLiveDeploy(agentId, ARCHIVED_AGENT_REASON);
  if (stopped) {
    log.info({ agentId, deployId: stopped.id }, 'deploy stopped');
    await liveDeploys.remove(stopped.subdomain);
  }
  return new AppError('AGENT_ARCHIVED', `agent ${agentId} is archived: its deploys cannot go live`);
}

/**
 * Asked after a deploy was written `live` or `canary` (a PATCH, a promotion by hand or by its window): the
 * archive writes the agent's state, then stops what is live; this runs after the write of live, then reads
 * the agent's state, so whichever comes second sees the other's write and a deploy never stays live on an
 * agent archived while it went live. Answers the error to refuse with (the deploy is offline again), or null.
 */
export async function offlineIfArchived(
  deps: ArchivedDeps,
  agentId: string,
  requestId: string,
  log: Logger,
): Promise<AppError | null> {
  if (!(await deps.agents.lookup(agentId, requestId)).archived) return null;
  return takeArchivedOffline(deps, agentId, log);
}
