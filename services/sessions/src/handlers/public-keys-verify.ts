import type { Handler } from '@vab/bus';
import { AppError } from '@vab/contracts';
import type { Deps } from '../deps.js';

/**
 * The gateway, on a `/live` route: is this publishable key a live key of the subdomain's agent, sent from one
 * of its origins? One answer (UNAUTHORIZED) for unknown, revoked, another agent's and a wrong origin.
 */
export const publicKeysVerify =
  ({ live, store }: Deps): Handler<'sessions.public-keys.verify'> =>
  async (req) => {
    const refused = new AppError(
      'UNAUTHORIZED',
      'this key may not start calls of this agent from this origin',
    );
    const agentId = await store.agentOfSubdomain(req.subdomain);
    if (!agentId) throw refused;
    const key = await live.verifyPublicKey(req.key, agentId, req.origin);
    if (!key) throw refused;
    return { keyId: key.id, agentId };
  };
