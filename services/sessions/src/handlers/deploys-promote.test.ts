import type { HandlerContext } from '@vab/bus';
import { AppError, type AgentLookup } from '@vab/contracts';
import { createLogger } from '@vab/service-kit';
import { Redis } from '@vab/storage';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AgentsDirectory } from '../agents-directory.js';
import { DEFAULT_LIMITS } from '../config.js';
import type { Deps } from '../deps.js';
import { CanaryJudge } from '../live/canary.js';
import type { CallsStore } from '../live/calls-store.js';
import type { LiveDeploys } from '../live/live-deploys.js';
import type { DeployPipeline } from '../live/pipeline.js';
import { SessionsStore } from '../store.js';
import { deploysPromote } from './deploys-promote.js';
import { redisStores } from '../../test/redis-stores.js';

const stores = redisStores();
let redis: Redis;
let store: SessionsStore;
/** The same Redis a minute ago: a canary written by it has been running for a minute. */
let earlier: SessionsStore;

beforeAll(async () => {
  ({ redis, store } = stores);
  earlier = new SessionsStore(redis, { limits: DEFAULT_LIMITS, now: () => Date.now() - 60_000 });
});

const log = createLogger('sessions', 'silent');
const ctx: HandlerContext = { requestId: 'r1', caller: undefined, log, setHeader: () => undefined };

/** The agents service as the code sees it: each lookup answers the next of `archived`. */
function directory(...archived: boolean[]): AgentsDirectory {
  const next = async (id: string): Promise<AgentLookup> => ({
    id,
    exists: true,
    archived: archived.shift() ?? true,
  });
  const requireActive = async (id: string) => {
    const found = await next(id);
    if (found.archived) throw new AppError('AGENT_ARCHIVED', `agent ${id} is archived`);
    return found;
  };
  return { lookup: next, requireExisting: next, requireActive } as unknown as AgentsDirectory;
}

/** An agent with a live deploy and a canary beside it (`writer` moves the canary). */
async function withCanary(agentId: string, canary: { canaryWindowMs?: number }, writer = store) {
  const live = await store.createDeploy(agentId, 1, agentId);
  await store.updateDeploy(agentId, live.id, 'building');
  await store.updateDeploy(agentId, live.id, 'live');
  const next = await store.createDeploy(agentId, 2, agentId, undefined, false, {
    trafficPercent: 10,
    ...canary,
  });
  await writer.updateDeploy(agentId, next.id, 'building');
  await writer.updateDeploy(agentId, next.id, 'canary');
  return { live, canary: next };
}

function judgeWith(agents: AgentsDirectory) {
  const published: string[] = [];
  const judge = new CanaryJudge({
    store,
    calls: {} as CallsStore,
    pipeline: {
      publishLive: async () => {
        published.push('live');
        return true;
      },
    } as unknown as DeployPipeline,
    agents,
    liveDeploys: { remove: async () => undefined, put: async () => undefined } as unknown as LiveDeploys,
    log,
    rule: { minCalls: 20, maxSlowdownMs: 300 },
  });
  return { judge, published };
}

describe('a canary promoted while its agent is archived', () => {
  it('by hand: is taken offline at once, and the promotion is refused AGENT_ARCHIVED', async () => {
    const agentId = 'a-promoted-raced';
    const { canary } = await withCanary(agentId, {});
    // active when the promotion is checked, archived by the time it is written
    const agents = directory(false, true);
    const { judge, published } = judgeWith(agents);
    const promote = deploysPromote({ canary: judge, agents } as unknown as Deps);
    await expect(promote({ agentId, deployId: canary.id }, ctx)).rejects.toMatchObject({
      code: 'AGENT_ARCHIVED',
    });
    expect(await store.getDeploy(agentId, canary.id)).toMatchObject({
      status: 'stopped',
      stopped: { reason: 'agent archived' },
    });
    expect(await store.liveDeploy(agentId)).toBeNull();
    expect(published).toEqual([]);
  });

  it('by its window: is taken offline, and nothing is announced live', async () => {
    const agentId = 'a-window-raced';
    const { canary } = await withCanary(agentId, { canaryWindowMs: 10_000 }, earlier);
    const { judge, published } = judgeWith(directory(true));
    expect(await judge.judge(agentId)).toBeNull();
    expect(await store.getDeploy(agentId, canary.id)).toMatchObject({
      status: 'stopped',
      promoted: { by: 'window' },
      stopped: { reason: 'agent archived' },
    });
    expect(published).toEqual([]);
  });

  it('an active agent: promoted and announced', async () => {
    const agentId = 'a-window-active';
    const { live, canary } = await withCanary(agentId, { canaryWindowMs: 10_000 }, earlier);
    const { judge, published } = judgeWith(directory(false));
    expect(await judge.judge(agentId)).toMatchObject({ id: canary.id, status: 'live' });
    expect(await store.getDeploy(agentId, live.id)).toMatchObject({ status: 'superseded' });
    expect(published).toEqual(['live']);
  });
});
