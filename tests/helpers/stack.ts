import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats, type Logger, type Served } from '@vab/bus';
import {
  createAccessLog,
  createLogger,
  idempotency,
  RedisIdempotencyStore,
  type Tracing,
} from '@vab/service-kit';
import { startAgentsService, type AgentsService } from '@vab/agents';
import {
  buildGateway,
  type EventStreamSettings,
  type GatewayAppConfig,
  type SecurityConfig,
} from '@vab/gateway';
import {
  loadConfig as loadPlaygroundConfig,
  startPlaygroundService,
  type RoomAgents,
  type PlaygroundService,
  type PlaygroundServiceConfig,
  type Resolver,
} from '@vab/playground';
import { startSessionsService, type SessionsLimits, type SessionsService } from '@vab/sessions';
import {
  loadConfig as loadWebhooksConfig,
  startWebhooksService,
  webhooksSettingsFrom,
  type WebhooksService,
  type WebhooksSettings,
} from '@vab/webhooks';
import {
  createRedis,
  redisTargetOf,
  scanKeys,
  WriteConcern,
  type RedisClient,
  type RedisTarget,
} from '@vab/storage';
import type { FastifyInstance } from 'fastify';
import { lineSink, startNats, startRedis } from '@vab/testkit';
import { documentCheck } from './openapi-check.js';

export interface Stack {
  baseUrl: string;
  natsUrl: string;
  logs: string[];
  gateway: FastifyInstance;
  /** A client of the stack's Redis (or Redis Cluster), for tests that look under the API. */
  redis: RedisClient;
  services: Record<ServiceName, RunningService>;
  addPlayground(natsUrl?: string): Promise<RunningService>;
  /** Another gateway on the same bus (its own port and connection); closed with the stack unless closed first. */
  addGateway(): Promise<{ baseUrl: string; close(): Promise<void> }>;
  close(): Promise<void>;
}

type ServiceName = 'agents' | 'sessions' | 'playground' | 'webhooks';

export interface RunningService {
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Drops the instance without any cleanup, as a killed process would. */
  crash(): Promise<void>;
  /** The playground instance's handle (sessions, reaper), when this is one. */
  playground?: PlaygroundService;
  /** The agents or sessions instance's handle (retention), when this is one. */
  agents?: AgentsService;
  sessions?: SessionsService;
  webhooks?: WebhooksService;
}

const testLogLevel = () => process.env.TEST_LOG_LEVEL ?? 'debug';

function captureLogger(name: string, sink: string[]): Logger {
  return createLogger(name, testLogLevel(), lineSink(sink));
}

export interface StackOptions {
  /** One server or several comma-separated (a cluster), as NATS_URL. */
  natsUrl?: string;
  /** Per process, where it differs from natsUrl (a NATS cluster test puts each on its own node). */
  natsUrls?: Partial<Record<'gateway' | ServiceName, string>>;
  redisUrl?: string;
  /** A Redis Cluster's seed nodes, as REDIS_CLUSTER_NODES (wins over redisUrl). */
  redisCluster?: { host: string; port: number }[];
  /** REDIS_WAIT_REPLICAS for the storing services. */
  waitReplicas?: number;
  /** The agents service's MAX_VERSIONS_PER_AGENT. */
  maxVersions?: number;
  /** The sessions service's test-session retention (default: off; tests sweep by hand). */
  testSessionDays?: number;
  /** The sessions service's test-run settings (TEST_RUN_CONCURRENCY, TEST_CASE_TIMEOUT_MS, …). */
  testRuns?: Partial<{ concurrency: number; caseTimeoutMs: number; attempts: number; heartbeatMs: number }>;
  bodyLimitBytes?: number;
  requestTimeoutMs?: number;
  sessionsLimits?: Partial<SessionsLimits>;
  /** The sessions service's canary settings (CANARY_STICKY_MS, CANARY_MIN_CALLS, CANARY_MAX_SLOWDOWN_MS). */
  canary?: Parameters<typeof startSessionsService>[0]['canary'];
  /** The sessions service's readiness-check bound and deploy sweep (DEPLOY_CHECK_TIMEOUT_MS, DEPLOY_SWEEP_*). */
  deploys?: Parameters<typeof startSessionsService>[0]['deploys'];
  /** NATS user and password per service, for a server that requires them (deploy/nats.conf). */
  natsCredentials?: Record<'gateway' | ServiceName, { user: string; pass: string }>;
  /** The gateway's security settings (API tokens, CORS, rate limits). */
  security?: Partial<SecurityConfig>;
  /** Overrides of the webhooks service's settings (retry schedule, egress allow-list, …). */
  webhooks?: Partial<WebhooksSettings>;
  /** Overrides of the playground's configuration. */
  playground?: Partial<PlaygroundServiceConfig>;
  /** How the playground's room agents join their rooms (tests stub it: no media server can run here). */
  roomAgents?: RoomAgents;
  /** The playground's env file and process provider keys (GET /api/env-keys). */
  envFile?: string;
  providerEnv?: Record<string, string>;
  /** How the playground resolves names in flow URLs (default: the system's resolver). */
  resolve?: Resolver;
  /** The gateway's UPSTREAM_URL (and how long it waits for it). */
  upstream?: { url: string; timeoutMs?: number };
  /** The gateway's event stream settings (heartbeat, per-client limit, buffer bound). */
  events?: Partial<EventStreamSettings>;
  /**
   * Other gateway settings (PUBLIC_URL, UPSTREAM_FORWARD_AUTHORIZATION, TICKET_TTL_MS, LIVE_DOMAIN,
   * CALLER_HASH_KEY, LIVE_KEY_RATE_LIMIT_MAX).
   */
  gateway?: Partial<
    Pick<
      GatewayAppConfig,
      | 'PUBLIC_URL'
      | 'UPSTREAM_FORWARD_AUTHORIZATION'
      | 'TICKET_TTL_MS'
      | 'REQUEST_RECEIVE_TIMEOUT_MS'
      | 'MAX_CONNECTIONS_PER_ADDRESS'
      | 'LIVE_DOMAIN'
      | 'CALLER_HASH_KEY'
      | 'LIVE_KEY_RATE_LIMIT_MAX'
    >
  >;
  /**
   * This test process's tracing (service-kit's `startTracing`, once per process): the gateway's route spans
   * and LiveKit's spans go to its provider; the bus and Redis spans need nothing more.
   */
  tracing?: Tracing;
}

/** A service's NATS user and password, when the test's server requires them. */
function natsUserOf(opts: StackOptions, service: 'gateway' | ServiceName) {
  const c = opts.natsCredentials?.[service];
  return c ? { user: c.user, pass: c.pass } : {};
}

/**
 * The playground's own defaults, with what a test needs: no .env of the machine, quick failure paths, no
 * reaper run unless a test asks for one, and flows may reach loopback (the stubs), as in local development.
 */
function playgroundConfigOf(opts: StackOptions): PlaygroundServiceConfig {
  return {
    ...loadPlaygroundConfig({ FLOW_EGRESS_ALLOW: '127.0.0.1' }),
    ENV_FILE: opts.envFile ?? '/nonexistent/.env',
    providerEnv: opts.providerEnv ?? {},
    INSTANCE_ID: 'pg-test',
    AGENT_JOIN_TIMEOUT_MS: 2000,
    MEDIA_SERVER_TIMEOUT_MS: 2000,
    LLM_DECISION_TIMEOUT_MS: 10_000,
    WEBHOOK_TIMEOUT_MS: 2000,
    REAPER_INTERVAL_MS: 3_600_000,
    REAPER_MIN_AGE_MS: 0,
    // load-based admission measures the process, and here the process is the whole stack and its test: a test
    // that is about load turns it on (tests/integration/resilience.test.ts runs instances as processes)
    LOAD_MAX_EVENT_LOOP_P99_MS: 0,
    LOAD_MAX_BEHIND_MS: 0,
    LOAD_MAX_CPU_PERCENT: 0,
    ...opts.playground,
  };
}

/** The webhooks service's own defaults, with what a test needs: receivers on loopback allowed, retries quick. */
export function webhooksSettingsOf(): WebhooksSettings {
  return {
    ...webhooksSettingsFrom(
      loadWebhooksConfig({ WEBHOOK_SECRETS_KEY: '07'.repeat(32), WEBHOOK_EGRESS_ALLOW: '127.0.0.1' }),
    ),
    timeoutMs: 2000,
    concurrency: 16,
    retry: { firstMs: 200, maxDelayMs: 1000, forMs: 60_000 },
    retentionDays: 1,
    pollMs: 50,
    stream: { maxAgeMs: 3_600_000, replicas: 1 },
  };
}

/** What every service of one stack shares: its servers, options, log lines, and playground numbering. */
interface StackContext {
  natsUrl: string;
  redis: RedisTarget;
  opts: StackOptions;
  logs: string[];
  playgroundConfig: PlaygroundServiceConfig;
  playgroundCount: number;
}

function startService(
  ctx: StackContext,
  name: ServiceName,
  nc: NatsConnection,
  redis: RedisClient,
  log: Logger,
) {
  const { opts } = ctx;
  const writes = new WriteConcern(redis, opts.waitReplicas ?? 0, 1000);
  if (name === 'agents') {
    const agents = startAgentsService({ nc, redis, log, writes, maxVersions: opts.maxVersions });
    return { served: agents, agents };
  }
  if (name === 'sessions') {
    const sessions = startSessionsService({
      nc,
      redis,
      log,
      writes,
      limits: opts.sessionsLimits,
      retention: { testSessionDays: opts.testSessionDays ?? 0, intervalMs: 3_600_000 },
      ...(opts.testRuns ? { testRuns: opts.testRuns } : {}),
      ...(opts.canary ? { canary: opts.canary } : {}),
      ...(opts.deploys ? { deploys: opts.deploys } : {}),
    });
    return { served: sessions, sessions };
  }
  if (name === 'webhooks') {
    const webhooks = startWebhooksService({
      nc,
      redis,
      log,
      settings: { ...webhooksSettingsOf(), ...opts.webhooks },
      ...(opts.resolve ? { resolve: opts.resolve } : {}),
    });
    return { served: webhooks, webhooks };
  }
  const playground = startPlaygroundService({
    nc,
    log,
    config: {
      ...ctx.playgroundConfig,
      INSTANCE_ID: `${ctx.playgroundConfig.INSTANCE_ID}-${++ctx.playgroundCount}`,
    },
    ...(opts.roomAgents ? { roomAgents: opts.roomAgents } : {}),
    ...(opts.resolve ? { resolve: opts.resolve } : {}),
    idempotency: idempotency(new RedisIdempotencyStore(redis, 'pg:')),
    tracing: opts.tracing,
  });
  return { served: playground, playground };
}

/** One service instance with its own connections, as a separate process would have. */
function serviceRunner(ctx: StackContext, name: ServiceName, natsUrl?: string): RunningService {
  const url = natsUrl ?? ctx.opts.natsUrls?.[name] ?? ctx.natsUrl;
  let nc: NatsConnection | undefined;
  let redis: RedisClient | undefined;
  let served: Served | undefined;
  const runner: RunningService = {
    async start() {
      const log = captureLogger(name, ctx.logs);
      // the transport production runs: connectNats, its reconnects and its coalesced writes
      nc = await connectNats({ url, name, service: name, ...natsUserOf(ctx.opts, name) }, log);
      redis = createRedis(ctx.redis, log, { name });
      const started = startService(ctx, name, nc, redis, log);
      if (started.playground) runner.playground = started.playground;
      if (started.agents) runner.agents = started.agents;
      if (started.sessions) runner.sessions = started.sessions;
      if (started.webhooks) runner.webhooks = started.webhooks;
      await started.served.ready;
      served = started.served;
    },
    async stop() {
      await served?.stop(2000);
      await nc?.drain();
      await redis?.quit().catch(() => undefined);
      served = undefined;
      nc = undefined;
    },
    async crash() {
      // as a killed process: no stop, no cleanup; its connections just go away
      await nc?.close();
      await redis?.quit().catch(() => undefined);
      served = undefined;
      nc = undefined;
    },
  };
  return runner;
}

async function startGateway(ctx: StackContext) {
  const { opts } = ctx;
  const log = captureLogger('gateway', ctx.logs);
  const nc = await connectNats(
    {
      url: opts.natsUrls?.gateway ?? ctx.natsUrl,
      name: 'gateway',
      service: 'gateway',
      ...natsUserOf(opts, 'gateway'),
    },
    log,
  );
  const gateway = await buildGateway({
    nc,
    log,
    accessLog: createAccessLog('gateway', testLogLevel(), lineSink(ctx.logs)),
    tracing: opts.tracing,
    config: {
      BODY_LIMIT_BYTES: opts.bodyLimitBytes ?? 2 * 1024 * 1024,
      REQUEST_TIMEOUT_MS: opts.requestTimeoutMs ?? 5000,
      READY_TIMEOUT_MS: 500,
      UPSTREAM_URL: opts.upstream?.url,
      UPSTREAM_TIMEOUT_MS: opts.upstream?.timeoutMs,
      // every test talks from 127.0.0.1, with the keep-alive connections of the file's earlier tests
      MAX_CONNECTIONS_PER_ADDRESS: 4096,
      ...opts.gateway,
      // load tests send thousands of requests from one address: unlimited unless a test sets limits
      security: { rateLimitMax: 1e9, sessionRateLimitMax: 1e9, ...opts.security },
      ...(opts.events ? { events: opts.events } : {}),
    },
  });
  await gateway.listen({ host: '127.0.0.1', port: 0 });
  const addr = gateway.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await gateway.close();
    await nc.drain();
  };
  return { gateway, baseUrl: `http://127.0.0.1:${port}`, close };
}

/**
 * The Redis a stack uses: the test's own cluster or server, else the one the environment names (a run of
 * the suite against a Redis Cluster sets REDIS_CLUSTER_NODES: scripts/test-cluster.mjs), else a new server.
 */
async function redisOf(
  opts: StackOptions,
  own: (start: () => Promise<{ url: string; dispose(): Promise<void> }>) => Promise<string>,
): Promise<RedisTarget> {
  if (opts.redisCluster) return { clusterNodes: opts.redisCluster };
  if (opts.redisUrl) return { url: opts.redisUrl };
  if (process.env.REDIS_CLUSTER_NODES) {
    return redisTargetOf({ REDIS_URL: '', REDIS_CLUSTER_NODES: process.env.REDIS_CLUSTER_NODES });
  }
  return { url: process.env.REDIS_URL ?? (await own(() => startRedis())) };
}

/** Every key matching `pattern`, on one server or on every master of a cluster (KEYS sees one node). */
export async function keysMatching(redis: RedisClient, pattern: string): Promise<string[]> {
  const out: string[] = [];
  for await (const batch of scanKeys(redis, pattern)) out.push(...batch);
  return out;
}

/**
 * The real request path, in this process: gateway (HTTP on a free port) → NATS → agents/sessions services
 * → Redis, each with its own connections, as separate processes would have.
 */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const logs: string[] = [];
  const toClose: (() => Promise<void>)[] = [];
  const own = async (start: () => Promise<{ url: string; dispose(): Promise<void> }>) => {
    const server = await start();
    toClose.push(() => server.dispose());
    return server.url;
  };
  const ctx: StackContext = {
    natsUrl: opts.natsUrl ?? process.env.NATS_URL ?? (await own(() => startNats())),
    redis: await redisOf(opts, own),
    opts,
    logs,
    playgroundConfig: playgroundConfigOf(opts),
    playgroundCount: 0,
  };
  const started = async (name: ServiceName, natsUrl?: string) => {
    const svc = serviceRunner(ctx, name, natsUrl);
    await svc.start();
    toClose.push(() => svc.stop());
    return svc;
  };
  const services: Record<ServiceName, RunningService> = {
    agents: await started('agents'),
    sessions: await started('sessions'),
    playground: await started('playground'),
    webhooks: await started('webhooks'),
  };
  const { gateway, baseUrl, close } = await startGateway(ctx);
  toClose.push(close);
  const redis = createRedis(ctx.redis, captureLogger('test', logs), { name: 'test' });
  toClose.push(async () => void (await redis.quit().catch(() => undefined)));

  return {
    baseUrl,
    natsUrl: ctx.natsUrl,
    logs,
    gateway,
    redis,
    services,
    /** Another playground instance with its own connection, as a separate process would have. */
    addPlayground: (natsUrl?: string) => started('playground', natsUrl),
    async addGateway() {
      const more = await startGateway(ctx);
      toClose.push(more.close);
      return { baseUrl: more.baseUrl, close: more.close };
    },
    async close() {
      for (const c of toClose.reverse()) await c();
    },
  };
}

export interface ApiResponse<T = unknown> {
  status: number;
  body: T;
  headers: Headers;
}

/**
 * A tiny client for what a builder front end would send. Every answer is checked against the API document
 * the gateway serves: one the document does not describe fails the test that got it.
 */
export function api(baseUrl: string) {
  const call = async <T = any>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<ApiResponse<T>> => {
    const init: RequestInit = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
    }
    const res = await fetch(baseUrl + path, init);
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // keep the text: the assertion will show it
    }
    const problem = (await documentCheck(baseUrl)).problem(method, path, res.status, parsed);
    if (problem) throw new Error(`${problem}\n${text.slice(0, 500)}`);
    return { status: res.status, body: parsed as T, headers: res.headers };
  };
  return {
    get: <T = any>(p: string, h?: Record<string, string>) => call<T>('GET', p, undefined, h),
    post: <T = any>(p: string, b?: unknown, h?: Record<string, string>) => call<T>('POST', p, b, h),
    put: <T = any>(p: string, b?: unknown, h?: Record<string, string>) => call<T>('PUT', p, b, h),
    patch: <T = any>(p: string, b?: unknown, h?: Record<string, string>) => call<T>('PATCH', p, b, h),
    delete: <T = any>(p: string, b?: unknown, h?: Record<string, string>) => call<T>('DELETE', p, b, h),
    raw: call,
  };
}

export const sampleFlow = () => ({
  nodes: [
    { id: 'agent-1', nodeType: 'agent', name: 'Receptionist', instructions: 'Be kind.', language: 'en' },
    { id: 'llm-1', nodeType: 'llm', provider: 'openai', model: 'gpt-4o-mini', temperature: 0.3 },
    {
      id: 'start-1',
      nodeType: 'start',
      command: 'Hello! How can I help?',
      isLiteral: true,
      customUiThing: { x: 1 },
    },
    { id: 'end-1', nodeType: 'end', command: 'Bye', isLiteral: true },
  ],
  edges: [
    { source: 'llm-1', sourceHandle: 'output', target: 'agent-1', targetHandle: 'llm_in' },
    { source: 'agent-1', sourceHandle: 'output', target: 'start-1', targetHandle: 'in' },
    { source: 'start-1', sourceHandle: 'output', target: 'end-1', targetHandle: 'in' },
  ],
});
