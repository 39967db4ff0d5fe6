import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Asked by the agents service before its retention removes old versions: none of these may go. */
export const deploysPinned =
  ({ store }: Deps): Handler<'sessions.deploys.pinned'> =>
  async (req) => ({ versions: await store.pinnedVersions(req.agentId) });
