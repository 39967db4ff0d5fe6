import type { HandlerContext } from '@vab/bus';
import type { AgentLookup } from '@vab/contracts';
import { createLogger } from '@vab/service-kit';
import { Redis } from '@vab/storage';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AgentsDirectory } from '../agents-directory.js';
import type { Deps } from '../deps.js';
import { SessionsStore } from '../store.js';
import { TestingStore } from '../testing/store.js';
import { deploysUpdate } from './deploys-update.js';
import { redisStores } from '../../test/redis-stores.js';

const stores = redisStores();
let redis: Redis;
let store: SessionsStore;

beforeAll(async () => {
  ({ redis, store } = stores);
});

const ctx: HandlerContext = {
  requestId: 'r1',
  caller: undefined,
  log: createLogger('sessions', 'silent'),
  setHeader: () => undefined,
};

/** The agents service as the handler sees it: each lookup answers the next of `archived`. */
function directory(...archived: boolean[]): AgentsDirectory {
  const next = async (id: string): Promise<AgentLookup> => ({
    id,
    exists: true,
    archived: archived.shift() ?? true,
  });
  return { lookup: next, requireExisting: next } as unknown as AgentsDirectory;
}

describe('a deploy going live', () => {
  it('is taken offline when its agent was archived while it went live (the archive found nothing live)', async () => {
    const agentId = 'a-raced';
    const deploy = await store.createDeploy(agentId, 1, 'raced');
    await store.updateDeploy(agentId, deploy.id, 'building');
    // active when the move is checked, archived by the time it is written: the archive's own stop ran
    // before this deploy was live, so this handler is the one that can see it
    const deps = {
      store,
      testing: new TestingStore(redis, { maxCases: 10, maxRuns: 10 }),
      agents: directory(false, true),
      liveDeploys: { remove: async () => undefined, put: async () => undefined },
      pipeline: { publishLive: async () => undefined },
    } as unknown as Deps;
    const update = { agentId, deployId: deploy.id, update: { status: 'live' as const } };
    await expect(deploysUpdate(deps)(update, ctx)).rejects.toMatchObject({ code: 'AGENT_ARCHIVED' });
    expect(await store.getDeploy(agentId, deploy.id)).toMatchObject({
      status: 'stopped',
      stopped: { reason: 'agent archived' },
    });
    expect(await store.stopLiveDeploy(agentId, 'again')).toBeNull();
  });
});
