import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** The sealed blob, for the playground only (NATS permissions): it alone opens it. */
export const credentialsSealed =
  ({ live }: Deps): Handler<'sessions.credentials.sealed'> =>
  async (req) => {
    return { sealed: await live.sealed(req.agentId) };
  };
