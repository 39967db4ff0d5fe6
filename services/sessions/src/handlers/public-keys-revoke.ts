import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Revokes a publishable key: refused from the next request on (asking again is safe). */
export const publicKeysRevoke =
  ({ live }: Deps): Handler<'sessions.public-keys.revoke'> =>
  async (req, ctx) => {
    const revoked = await live.revokePublicKey(req.agentId, req.keyId);
    ctx.log.info({ agentId: req.agentId, keyId: req.keyId }, 'publishable key revoked');
    return revoked;
  };
