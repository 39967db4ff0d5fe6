import type { NatsConnection } from '@nats-io/transport-node';
import { serve, type HandlerTable, type Logger, type Served } from '@vab/bus';
import { idempotency, RedisIdempotencyStore } from '@vab/service-kit';
import type { RedisClient, WriteConcern } from '@vab/storage';
import { SessionRetention, type RetentionSettings } from './retention.js';
import { AgentsDirectory } from './agents-directory.js';
import { DEFAULT_LIMITS, type SessionsLimits } from './config.js';
import type { Deps } from './deps.js';
import { conversationsAppend } from './handlers/conversations-append.js';
import { conversationsList } from './handlers/conversations-list.js';
import { deploysCreate } from './handlers/deploys-create.js';
import { deploysList } from './handlers/deploys-list.js';
import { deploysUpdate } from './handlers/deploys-update.js';
import { deploysPinned } from './handlers/deploys-pinned.js';
import { messagesAppend } from './handlers/messages-append.js';
import { messagesList } from './handlers/messages-list.js';
import { sessionsHealth } from './handlers/sessions-health.js';
import { testSessionsClose } from './handlers/test-sessions-close.js';
import { testSessionsCreate } from './handlers/test-sessions-create.js';
import { testSessionsGet } from './handlers/test-sessions-get.js';
import { testSessionsList } from './handlers/test-sessions-list.js';
import { SessionsStore } from './store.js';

export function sessionsHandlers(deps: Deps): HandlerTable<'sessions'> {
  return {
    'sessions.conversations.list': conversationsList(deps),
    'sessions.conversations.append': conversationsAppend(deps),
    'sessions.test.create': testSessionsCreate(deps),
    'sessions.test.list': testSessionsList(deps),
    'sessions.test.get': testSessionsGet(deps),
    'sessions.test.close': testSessionsClose(deps),
    'sessions.messages.list': messagesList(deps),
    'sessions.messages.append': messagesAppend(deps),
    'sessions.deploys.create': deploysCreate(deps),
    'sessions.deploys.list': deploysList(deps),
    'sessions.deploys.update': deploysUpdate(deps),
    'sessions.deploys.pinned': deploysPinned(deps),
    'sessions.health': sessionsHealth(deps),
  };
}

export interface SessionsService extends Served {
  retention: SessionRetention;
}

export function startSessionsService(deps: {
  nc: NatsConnection;
  redis: RedisClient;
  log: Logger;
  writes?: WriteConcern;
  limits?: Partial<SessionsLimits> | undefined;
  retention?: RetentionSettings;
}): SessionsService {
  const limits = { ...DEFAULT_LIMITS, ...deps.limits };
  const store = new SessionsStore(deps.redis, limits, deps.writes);
  const handlerDeps: Deps = {
    store,
    agents: new AgentsDirectory(deps.nc, limits.agentLookupTimeoutMs),
    redis: deps.redis,
  };
  const served = serve(deps.nc, {
    service: 'sessions',
    handlers: sessionsHandlers(handlerDeps),
    log: deps.log,
    idempotency: idempotency(new RedisIdempotencyStore(deps.redis, 'ss:')),
  });
  const retention = new SessionRetention(
    store,
    deps.redis,
    deps.retention ?? { testSessionDays: 0, intervalMs: 3_600_000 },
    deps.log,
  );
  retention.start();
  return {
    ...served,
    retention,
    stop: async (timeoutMs) => {
      await retention.stop();
      await served.stop(timeoutMs);
    },
  };
}
