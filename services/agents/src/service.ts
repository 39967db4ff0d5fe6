import { busClientOf, serve, type BusClient, type HandlerTable, type Logger, type Served } from '@vab/bus';
import type { NatsConnection } from '@nats-io/transport-node';
import { idempotency, RedisIdempotencyStore } from '@vab/service-kit';
import type { RedisClient, WriteConcern } from '@vab/storage';
import { VersionRetention } from './retention.js';
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
import { agentsVersionsDiff } from './handlers/agents-versions-diff.js';
import { AgentStore, DEFAULT_MAX_VERSIONS } from './store.js';

/** Bound on asking the sessions service for a diff's version stats. */
const STATS_TIMEOUT_MS = 2_000;
/** Bound on asking the sessions service to take an archived agent's live deploy offline. */
const DEPLOYS_TIMEOUT_MS = 2_000;

export function agentsHandlers(
  store: AgentStore,
  redis: RedisClient,
  bus: BusClient,
  log: Logger,
): HandlerTable<'agents'> {
  return {
    'agents.create': agentsCreate(store),
    'agents.list': agentsList(store),
    'agents.get': agentsGet(store),
    'agents.update': agentsUpdate(store),
    'agents.archive': agentsArchive(store, bus, DEPLOYS_TIMEOUT_MS),
    'agents.lookup': agentsLookup(store),
    'agents.versions.list': agentsVersionsList(store),
    'agents.versions.get': agentsVersionsGet(store),
    'agents.versions.restore': agentsVersionsRestore(store),
    'agents.versions.diff': agentsVersionsDiff(store, bus, log, STATS_TIMEOUT_MS),
    'agents.health': agentsHealth(redis),
  };
}

export interface AgentsServiceDeps {
  nc: NatsConnection;
  redis: RedisClient;
  log: Logger;
  writes?: WriteConcern;
  /** Newest snapshots kept per agent (MAX_VERSIONS_PER_AGENT); versions deploys pin are kept too. */
  maxVersions?: number;
}

export interface AgentsService extends Served {
  retention: VersionRetention;
  /** Rebuilds the list's view from the agents' hashes (`npm run repair` runs the same). */
  repairViews(): Promise<{ agents: number; listed: number }>;
}

/** Serves the agents subjects on an open NATS connection; `main.ts` owns the connections' lifecycle. */
export function startAgentsService(deps: AgentsServiceDeps): AgentsService {
  const store = new AgentStore(deps.redis, {
    ...(deps.writes ? { writes: deps.writes } : {}),
    // called only after a save, by when `retention` below exists
    onSnapshots: (id, stored) => retention.onSnapshots(id, stored),
  });
  const retention = new VersionRetention(deps.nc, store, deps.maxVersions ?? DEFAULT_MAX_VERSIONS, deps.log);
  const served = serve(deps.nc, {
    service: 'agents',
    handlers: agentsHandlers(store, deps.redis, busClientOf(deps.nc), deps.log),
    log: deps.log,
    idempotency: idempotency(new RedisIdempotencyStore(deps.redis, 'ag:')),
  });
  return {
    ...served,
    ready: Promise.all([served.ready, moveLegacyView(store, deps.log)]).then(() => {}),
    retention,
    repairViews: () => store.repairViews(),
  };
}

/** A store written before the list's view had its own slot: rebuilt into the new keys once, at start. */
async function moveLegacyView(store: AgentStore, log: Logger): Promise<void> {
  if (!(await store.hasLegacyView())) return;
  const done = await store.repairViews();
  log.info(done, 'list view moved to its own slot');
}
