import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** A new publishable key, shown this once (only its hash is kept). */
export const publicKeysCreate =
  ({ live, agents }: Deps): Handler<'sessions.public-keys.create'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    const created = await live.createPublicKey(req.agentId, req.body);
    ctx.log.info({ agentId: req.agentId, keyId: created.id }, 'publishable key created');
    return created;
  };
