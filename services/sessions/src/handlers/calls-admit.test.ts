import type { HandlerContext } from '@vab/bus';
import type { AgentLookup } from '@vab/contracts';
import { createLogger } from '@vab/service-kit';
import { describe, expect, it } from 'vitest';
import type { Deps } from '../deps.js';
import { redisStores } from '../../test/redis-stores.js';
import { callsAdmit } from './calls-admit.js';

const stores = redisStores();

const ctx: HandlerContext = {
  requestId: 'r1',
  caller: undefined,
  log: createLogger('sessions', 'silent'),
  setHeader: () => undefined,
};

describe('a refusal at a cap', () => {
  it('whose busy record could not be written leaves the next refusal of that caller to be recorded', async () => {
    const { store, calls } = stores;
    const agentId = 'a-refusals';
    const deploy = await store.createDeploy(agentId, 1, 'refusals');
    await store.updateDeploy(agentId, deploy.id, 'building');
    await store.updateDeploy(agentId, deploy.id, 'live');
    let failCreate = false;
    const failing = Object.create(calls) as typeof calls;
    failing.create = (...a: Parameters<typeof calls.create>) =>
      failCreate ? Promise.reject(new Error('storage went away')) : calls.create(...a);
    const published: string[] = [];
    const deps = {
      store,
      calls: failing,
      agents: { lookup: async (id: string): Promise<AgentLookup> => ({ id, exists: true, archived: false }) },
      live: { callSettings: async () => ({ livePage: true }), sealed: async () => null },
      events: { publish: async (_agentId: string, type: string) => void published.push(type) },
      canary: { check: () => undefined },
      canaryStickyMs: 60_000,
    } as unknown as Deps;
    const admit = () =>
      callsAdmit(deps)(
        {
          agentId,
          channel: 'web',
          caller: { addressHash: 'h' },
          addressKey: 'one-address',
          instanceId: 'pg-1',
        } as never,
        ctx,
      );

    // the address's cap is 3 calls at once (the stores' fixture)
    for (let i = 0; i < 3; i++) await admit();
    failCreate = true;
    await expect(admit()).rejects.toThrow('storage went away');
    failCreate = false;
    await expect(admit()).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    const listed = await calls.list({ agentId, limit: 50 });
    expect(listed.calls.filter((c) => c.endedReason === 'busy')).toHaveLength(1);
    expect(published.filter((t) => t === 'call.ended')).toHaveLength(1);
    // recorded within the minute: the next is not
    await expect(admit()).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(
      (await calls.list({ agentId, limit: 50 })).calls.filter((c) => c.endedReason === 'busy'),
    ).toHaveLength(1);
  });
});
