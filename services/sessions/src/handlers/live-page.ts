import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * The gateway, before it serves `/live/:subdomain`: the page answers unless the subdomain's agent turned it off
 * (`livePage: false`). A subdomain with nothing live keeps its page (which says so), as before.
 */
export const livePage =
  ({ live, store }: Deps): Handler<'sessions.live.page'> =>
  async (req) => {
    const agentId = await store.agentOfSubdomain(req.subdomain);
    if (!agentId) return { page: true };
    return { page: (await live.callSettings(agentId)).livePage };
  };
