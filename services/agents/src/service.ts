import { serve, type HandlerTable, type Logger, type Served } from '@vab/bus';
import type { NatsConnection } from '@nats-io/transport-node';
import { idempotency, RedisIdempotencyStore } from '@vab/service-kit';
import type { Redis } from '@vab/storage';
import { agentsArchive } from './handlers/agents-archive.js';
import { agentsCreate } from './handlers/agents-create.js';
import { agentsGet } from './handlers/agents-get.js';
import { agentsHealth } from './handlers/agents-health.js';
import { agentsList } from './handlers/agents-list.js';
import { agentsLookup } from './handlers/agents-lookup.js';
import { agentsUpdate } from './handlers/agents-update.js';
import { agentsVersionsGet } from './handlers/agents-versions-get.js';
import { agentsVersionsList } from './handlers/agents-versions-list.js';
import { agentsVersionsRestore } from './handlers/agents-versions-restore.js';
import { AgentStore } from './store.js';

export function agentsHandlers(store: AgentStore, redis: Redis): HandlerTable<'agents'> {
  return {
    'agents.create': agentsCreate(store),
    'agents.list': agentsList(store),
    'agents.get': agentsGet(store),
    'agents.update': agentsUpdate(store),
    'agents.archive': agentsArchive(store),
    'agents.lookup': agentsLookup(store),
    'agents.versions.list': agentsVersionsList(store),
    'agents.versions.get': agentsVersionsGet(store),
    'agents.versions.restore': agentsVersionsRestore(store),
    'agents.health': agentsHealth(redis),
  };
}

/** Serves the agents subjects on an open NATS connection; `main.ts` owns the connections' lifecycle. */
export function startAgentsService(deps: { nc: NatsConnection; redis: Redis; log: Logger }): Served {
  const store = new AgentStore(deps.redis);
  return serve(deps.nc, {
    service: 'agents',
    handlers: agentsHandlers(store, deps.redis),
    log: deps.log,
    idempotency: idempotency(new RedisIdempotencyStore(deps.redis, 'ag:')),
  });
}
