import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, type BusClient, type Logger } from '@vab/bus';
import { createAccessLog, processMetrics, type AccessLog } from '@vab/service-kit';
import {
  AppError,
  CallParams,
  Headers,
  healthSubjectOf,
  IfMatch,
  ServiceNames,
  SessionEvent,
  SessionEventsQuery,
  specOf,
  Subjects,
  TestSessionParams,
} from '@vab/contracts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { loadConfig, securityOf, type GatewayConfig } from './config.js';
import { registerConsole } from './console.js';
import { createEdge } from './edge.js';
import { liveHostRewrite, registerLivePage } from './live-page.js';
import { DEFAULT_EVENT_STREAMS, EventStreams, lastEventIdOf, type EventStreamSettings } from './events.js';
import { API_TITLE, errorResponses, operationIdOf, responsesOf, swaggerOptions } from './openapi.js';
import { PROXY_METHODS, registerUpstream } from './proxy.js';
import { registerRecordingRoute } from './recordings.js';
import { routes, type AnyRoute } from './route-table.js';
import { callerOf, DOCS_PREFIX, sessionRateLimit, type SecurityConfig } from './security.js';
import { createTickets, kvUsedTickets, registerTicketRoute } from './tickets.js';
import { DEFAULT_VOICE_SOCKET, registerVoiceSocket } from './voice-socket.js';
import { registerLiveCalls } from './live-calls.js';

export type AppConfig = Pick<GatewayConfig, 'BODY_LIMIT_BYTES' | 'REQUEST_TIMEOUT_MS' | 'READY_TIMEOUT_MS'> &
  Partial<
    Pick<
      GatewayConfig,
      | 'STACK_ID'
      | 'UPSTREAM_URL'
      | 'UPSTREAM_TIMEOUT_MS'
      | 'UPSTREAM_FORWARD_AUTHORIZATION'
      | 'TICKET_TTL_MS'
      | 'PUBLIC_URL'
      | 'REQUEST_RECEIVE_TIMEOUT_MS'
      | 'MAX_CONNECTIONS_PER_ADDRESS'
      | 'LIVE_DOMAIN'
      | 'CALLER_HASH_KEY'
      | 'LIVE_KEY_RATE_LIMIT_MAX'
      | 'RATE_LIMIT_WINDOW_MS'
    >
  > & {
    security?: Partial<SecurityConfig>;
    events?: Partial<EventStreamSettings>;
  };

/** The methods CORS allows: every one a route serves (the ticket route's POST among them), and OPTIONS. */
export function corsMethodsOf(extra: readonly string[] = []): string[] {
  return [...new Set([...routes.map((r) => r.method), 'POST', ...extra, 'OPTIONS'])];
}

/** What an app factory caller does not set: the configuration's defaults (no tokens, no CORS). */
const DEFAULT_CONFIG = loadConfig({});
const DEFAULT_SECURITY: SecurityConfig = securityOf(DEFAULT_CONFIG);

const IdempotencyKey = z
  .string()
  .regex(/^[A-Za-z0-9._:-]{1,200}$/, 'must be 1–200 characters of letters, digits and -_.:');

/**
 * The gateway: HTTP in, one NATS request per route, the service's reply bytes out untouched. It holds no
 * business logic and touches no storage.
 */
export async function buildGateway(deps: {
  nc: NatsConnection;
  log: Logger;
  /** Where the line per request goes; by default stdout, at the main logger's level. */
  accessLog?: AccessLog;
  config: AppConfig;
  /** Whether spans are recorded (service-kit's `startTracing`). */
  tracing?: { enabled: boolean } | undefined;
}): Promise<FastifyInstance> {
  const { nc, log, config } = deps;
  const accessLog = deps.accessLog ?? createAccessLog('gateway', log.level);
  const bus = busClientOf(nc);
  const ticketTtlMs = config.TICKET_TTL_MS ?? DEFAULT_CONFIG.TICKET_TTL_MS;
  const apiTokens = config.security?.apiTokens ?? DEFAULT_SECURITY.apiTokens;
  const tickets = createTickets({ apiTokens, ttlMs: ticketTtlMs, used: kvUsedTickets(nc, ticketTtlMs) });
  const security: SecurityConfig = {
    ...DEFAULT_SECURITY,
    corsMethods: corsMethodsOf(config.UPSTREAM_URL ? PROXY_METHODS : []),
    tickets,
    ...config.security,
  };
  const app = await createEdge({
    log,
    accessLog,
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    security,
    tracing: deps.tracing,
    receiveTimeoutMs: config.REQUEST_RECEIVE_TIMEOUT_MS,
    maxConnectionsPerAddress: config.MAX_CONNECTIONS_PER_ADDRESS,
    rewriteUrl: liveHostRewrite(config.LIVE_DOMAIN),
  });

  closeConnectionsWhenAnswered(app);

  const maxPayload = nc.info?.max_payload;
  if (maxPayload !== undefined && config.BODY_LIMIT_BYTES > maxPayload - 64 * 1024) {
    log.warn(
      { code: 'BODY_LIMIT_ABOVE_BUS_PAYLOAD', bodyLimit: config.BODY_LIMIT_BYTES, maxPayload },
      'BODY_LIMIT_BYTES exceeds the NATS max_payload: larger bodies will answer 413 from the bus check',
    );
  }

  // The document is the one `npm run generate` writes (docs/openapi.json), whatever this gateway proxies:
  // proxied paths are the upstream's, not operations of this API. PUBLIC_URL only changes `servers`.
  const document = await documentFor(config.PUBLIC_URL);
  await app.register(swagger, swaggerOptions(routes));
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    staticCSP: DOCS_CSP,
    // the tab names the API, not the viewer
    theme: { title: `${API_TITLE}: API reference` },
    uiConfig: {
      // no call to validator.swagger.io from the page (the document is checked by `npm run lint`)
      validatorUrl: null,
      // without the standalone top bar: its box loads a document from any URL, which this page's policy
      // refuses (an error in the console), and it only repeated the document's URL
      layout: 'BaseLayout',
    },
    // the library's redirect keeps a query on the path it redirects to (`/docs/static/index.html?x` to itself)
    uiHooks: { onRequest: redirectIndexWithQuery },
    // the document as it is: the library's default clones it on every request only to be replaced
    transformSpecificationClone: false,
    transformSpecification: () => document,
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => document);

  await registerConsole(app);
  await registerLivePage(app, { bus, timeoutMs: config.REQUEST_TIMEOUT_MS });
  registerOperatorRoutes(app, bus, config.READY_TIMEOUT_MS, config.STACK_ID);

  const streams = eventStreams(app, { nc, bus, log }, config);
  registerEventsRoute(app, streams);
  registerRecordingRoute(app, { nc, log });
  const upstream = Boolean(config.UPSTREAM_URL);
  const relay = registerVoiceSocket(app, { nc, bus, streams, log, settings: DEFAULT_VOICE_SOCKET, upstream });
  registerLiveCalls(app, { bus, tickets, relay, config });
  for (const r of routes) registerRoute(app, r, { bus, config, security, streams });
  registerTicketRoute(app, tickets, { upstream: Boolean(config.UPSTREAM_URL), callerOf });
  if (config.UPSTREAM_URL) {
    await registerUpstream(
      app,
      {
        url: config.UPSTREAM_URL,
        timeoutMs: config.UPSTREAM_TIMEOUT_MS ?? 30_000,
        forwardAuthorization: config.UPSTREAM_FORWARD_AUTHORIZATION ?? false,
      },
      accessLog,
    );
    log.info(
      { upstream: new URL(config.UPSTREAM_URL).origin },
      'requests outside the route table go upstream',
    );
  }
  return app;
}

/**
 * The API reference page's policy: everything from this gateway, nothing from elsewhere (the page works
 * offline), no inline script. Not the library's own (`staticCSP: true`): that one allows fonts and styles
 * from any https origin and asks for `upgrade-insecure-requests`, which turns every asset of a page opened
 * over plain HTTP by a name other than localhost (a VM's address, a LAN name) into an https request that
 * fails: a blank page. Swagger UI sets style attributes, hence inline styles (never scripts).
 */
export const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "script-src-attr 'none'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "frame-ancestors 'self'",
  "base-uri 'self'",
  "form-action 'self'",
].join('; ');

const INDEX_HTML = `${DOCS_PREFIX}/static/index.html`;
/** `/docs/static/index.html?…` goes to `/docs/?…` (the library matches the path only without a query). */
function redirectIndexWithQuery(req: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const url = req.url;
  if (url.startsWith(`${INDEX_HTML}?`)) {
    void reply.redirect(`${DOCS_PREFIX}/${url.slice(INDEX_HTML.length)}`);
    return;
  }
  done();
}

/** The header of `/readyz` that names the stack of `npm start` this gateway belongs to (STACK_ID, when set). */
export const STACK_ID_HEADER = 'x-stack-id';

/**
 * `/metrics`, `/healthz` and `/readyz`: for the operator's probes and scrapers, not in the API document.
 * Under `npm start`, `/readyz` names the stack: its supervisor takes no other program on PORT for its gateway.
 */
function registerOperatorRoutes(
  app: FastifyInstance,
  bus: BusClient,
  readyTimeoutMs: number,
  stackId: string | undefined,
): void {
  // Prometheus text of this process; behind API_TOKENS like the API (a scraper sends the bearer token)
  const { registry } = processMetrics();
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) =>
    reply.header('content-type', registry.contentType).send(await registry.metrics()),
  );
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (req, reply) => {
    const connected = bus.isConnected();
    const checks = await Promise.all(
      ServiceNames.map(async (service) => {
        if (!connected) return [service, 'bus disconnected'] as const;
        try {
          await bus.request(
            healthSubjectOf[service],
            {},
            { timeoutMs: readyTimeoutMs, requestId: String(req.id) },
          );
          return [service, 'up'] as const;
        } catch (err) {
          return [service, err instanceof AppError ? err.code : 'error'] as const;
        }
      }),
    );
    const ready = connected && checks.every(([, s]) => s === 'up');
    if (stackId) reply.header(STACK_ID_HEADER, stackId);
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'not ready',
      bus: connected ? 'connected' : 'disconnected',
      services: Object.fromEntries(checks),
    });
  });
}

/** The document depends on the code and PUBLIC_URL only: made once per process and URL. */
const documents = new Map<string, Promise<Record<string, unknown>>>();
function documentFor(publicUrl: string | undefined): Promise<Record<string, unknown>> {
  const key = publicUrl ?? '';
  let doc = documents.get(key);
  if (!doc) {
    doc = apiDocument({ publicUrl });
    documents.set(key, doc);
    doc.catch(() => documents.delete(key));
  }
  return doc;
}

/**
 * The API document, made as the running gateway makes it (the same routes and schemas) without a bus:
 * what `npm run generate` writes to docs/openapi.json for linting and for the typed client.
 */
export async function apiDocument(
  opts: { publicUrl?: string | undefined } = {},
): Promise<Record<string, unknown>> {
  const { pino } = await import('pino');
  const log = pino({ level: 'silent' });
  const config = DEFAULT_CONFIG;
  const app = await createEdge({
    log,
    accessLog: { request: () => undefined },
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    security: DEFAULT_SECURITY,
  });
  await app.register(swagger, swaggerOptions(routes, opts.publicUrl));
  registerEventsRoute(app, undefined);
  registerRecordingRoute(app, undefined);
  for (const r of routes) {
    registerRoute(app, r, { bus: undefined, config, security: DEFAULT_SECURITY, streams: undefined });
  }
  registerTicketRoute(
    app,
    createTickets({ apiTokens: [], ttlMs: config.TICKET_TTL_MS, used: { markUsed: async () => false } }),
    { upstream: false, callerOf },
  );
  await app.ready();
  const doc = app.swagger() as unknown as Record<string, unknown>;
  await app.close();
  return doc;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route-table entry a route was made from (the API document reads it). */
    api?: AnyRoute;
  }
}

/** The headers a route reads, as its schema declares (and documents) them. */
function headersOf(r: AnyRoute): z.ZodType | undefined {
  const spec = specOf(r.subject);
  const shape: Record<string, z.ZodType> = {};
  if (spec.etag && r.method !== 'GET') {
    shape['if-match'] = IfMatch.optional().describe('An ETag from an earlier answer, or `*`');
  }
  if (spec.idempotent) {
    shape['idempotency-key'] = IdempotencyKey.optional().describe(
      'A retry with the same key gets the first answer again and creates nothing',
    );
  }
  return Object.keys(shape).length > 0 ? z.looseObject(shape) : undefined;
}

/** The event streams of this gateway; open ones end first when it closes, and clients resume elsewhere. */
function eventStreams(
  app: FastifyInstance,
  deps: { nc: NatsConnection; bus: BusClient; log: Logger },
  config: AppConfig,
): EventStreams {
  const streams = new EventStreams({
    ...deps,
    settings: { ...DEFAULT_EVENT_STREAMS, ...config.events },
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
  });
  app.addHook('preClose', (done) => {
    streams.closeAll();
    // a connection that never sends a request (a browser's preconnect) would hold close() for its headers
    // timeout: in-flight requests get their own timeout to finish, then whatever is left is closed
    setTimeout(() => app.server.closeAllConnections(), config.REQUEST_TIMEOUT_MS).unref();
    done();
  });
  return streams;
}

/**
 * Once the gateway closes, every answer carries `Connection: close`: a client's keep-alive connection ends
 * with the answer it was waiting for, instead of holding close() until the preClose timer
 * (REQUEST_TIMEOUT_MS) closes it. `npm start` stopped 5 s after a turn answered during its stop without this.
 */
function closeConnectionsWhenAnswered(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onSend', async (_req, reply, payload) => {
    if (closing) reply.header('connection', 'close');
    return payload;
  });
}

/** Whether a request asks for the Server-Sent Events form of a route that has one. */
const wantsEvents = (req: FastifyRequest) => /\btext\/event-stream\b/.test(req.headers.accept ?? '');

/**
 * A session's events as Server-Sent Events: not a request/reply route, so not in the route table. A call's
 * (issue 45) are the same stream (the call is hosted as a voice session whose id is the call's): one route
 * each, one machinery.
 */
function registerEventsRoute(app: FastifyInstance, streams: EventStreams | undefined): void {
  const errors = errorResponses(
    'VALIDATION_FAILED',
    'UNAUTHORIZED',
    'NOT_FOUND',
    'RATE_LIMITED',
    'SERVICE_UNAVAILABLE',
  );
  const ok = {
    description:
      'An event stream: `id: <event id>`, `event: <type>`, `data: <event JSON>`; `: ping` heartbeats',
    content: { 'text/event-stream': { schema: SessionEvent } },
  };
  app.route({
    method: 'GET',
    url: '/api/agents/:id/test-sessions/:sessionId/events',
    schema: {
      operationId: 'sessionEvents',
      summary:
        "A session's events as Server-Sent Events: everything after Last-Event-ID, then live until it ends",
      tags: ['test-sessions'],
      params: TestSessionParams,
      querystring: SessionEventsQuery,
      response: { 200: ok, ...errors },
    },
    handler: async (req, reply) => {
      if (!streams) throw new AppError('SERVICE_UNAVAILABLE', 'this gateway has no bus');
      const params = req.params as TestSessionParams;
      const after = lastEventIdOf(req, req.query as SessionEventsQuery);
      await streams.serve(req, reply, { agentId: params.id, sessionId: params.sessionId, after });
    },
  });
  app.route({
    method: 'GET',
    url: '/api/agents/:id/calls/:callId/events',
    schema: {
      operationId: 'callEvents',
      summary:
        "A call's events as Server-Sent Events (as a session's): everything after Last-Event-ID, then live until it ends",
      tags: ['calls'],
      params: CallParams,
      querystring: SessionEventsQuery,
      response: { 200: ok, ...errors },
    },
    handler: async (req, reply) => {
      if (!streams) throw new AppError('SERVICE_UNAVAILABLE', 'this gateway has no bus');
      const params = req.params as CallParams;
      const after = lastEventIdOf(req, req.query as SessionEventsQuery);
      await streams.serve(req, reply, { agentId: params.id, sessionId: params.callId, call: true, after });
    },
  });
}

/** The top-level fields a body schema knows: an object's, or every option's of a union of objects. */
function fieldsOf(schema: z.ZodType): Set<string> | undefined {
  if (schema instanceof z.ZodObject) return new Set(Object.keys(schema.shape));
  if (schema instanceof z.ZodUnion) {
    const all = (schema.options as z.ZodType[]).map(fieldsOf);
    return all.every(Boolean) ? new Set(all.flatMap((f) => [...f!])) : undefined;
  }
  return undefined;
}

/** The body schema as the document shows it: no field beyond its own (so a typed client refuses a typo). */
function strictOf(schema: z.ZodType): z.ZodType {
  if (schema instanceof z.ZodObject) return schema.strict();
  if (schema instanceof z.ZodUnion) return z.union((schema.options as z.ZodType[]).map(strictOf));
  return schema;
}

/**
 * Strict bodies: a field the route's body does not know answers 400 naming it, so a typo is never a silent
 * no-op; the resource's read-only fields (sent back by a front end saving the whole object) are dropped.
 * Only the top level: what is inside (a flow, an operation) stays as lenient as its schema.
 */
function strictBody(r: AnyRoute) {
  const known = r.body && !r.lenientBody ? fieldsOf(r.body) : undefined;
  if (!known) return undefined;
  const ignored = (r.readOnly ?? []).filter((f) => !known.has(f));
  return async (req: FastifyRequest) => {
    const body = req.body;
    if (!body || typeof body !== 'object' || Array.isArray(body)) return;
    const record = body as Record<string, unknown>;
    for (const f of ignored) delete record[f];
    const unknown = Object.keys(record).filter((k) => !known.has(k));
    if (unknown.length > 0) {
      throw new AppError('VALIDATION_FAILED', `unknown field ${unknown.map((k) => `"${k}"`).join(', ')}`, {
        issues: unknown.map((k) => ({ path: `body.${k}`, message: `unknown field "${k}"` })),
      });
    }
  };
}

/** What every route of the table is served with. */
interface RouteDeps {
  /** Absent: a document-only app, whose routes are never called. */
  bus: BusClient | undefined;
  config: AppConfig;
  security: SecurityConfig;
  /** Where a route that `streamsEvents` streams from (absent without a bus). */
  streams: EventStreams | undefined;
}

function registerRoute(app: FastifyInstance, r: AnyRoute, deps: RouteDeps): void {
  const { bus, config, security, streams } = deps;
  const headers = headersOf(r);
  const spec = specOf(r.subject);
  const strict = strictBody(r);
  const body = r.body && strict ? strictOf(r.body) : r.body;
  app.route({
    method: r.method,
    url: r.url,
    // the route's own schemas: validated with zod here, and the API document made of the same
    schema: {
      operationId: operationIdOf(r),
      summary: r.summary,
      tags: [r.tag],
      ...(r.params ? { params: r.params } : {}),
      ...(r.query ? { querystring: r.query } : {}),
      // no body at all reaches the validator as null
      ...(body ? { body: r.bodyOptional ? body.nullish() : body } : {}),
      ...(headers ? { headers } : {}),
      response: responsesOf(r),
    },
    config: { api: r, ...(r.expensive ? { rateLimit: sessionRateLimit(security) } : {}) },
    ...(strict ? { preValidation: strict } : {}),
    handler: async (req: FastifyRequest, reply) => {
      if (!bus) throw new AppError('SERVICE_UNAVAILABLE', 'this gateway has no bus');
      if (r.streamsEvents && streams && wantsEvents(req)) {
        const { id, sessionId } = req.params as TestSessionParams;
        const { text } = req.body as { text: string };
        return streams.streamTurn(req, reply, { agentId: id, sessionId }, () =>
          bus.request(
            Subjects.textSessionTurn,
            { agentId: id, sessionId, text },
            { timeoutMs: spec.timeoutMs ?? config.REQUEST_TIMEOUT_MS, requestId: String(req.id) },
          ),
        );
      }
      const ifMatch = spec.etag ? req.headers['if-match'] : undefined;
      const idempotencyKey = spec.idempotent ? req.headers['idempotency-key'] : undefined;
      const payload = r.toRequest({
        params: req.params ?? {},
        query: r.query ? ((req.query ?? {}) as Record<string, string | undefined>) : {},
        body: r.body ? (req.body ?? {}) : undefined,
        ifMatch: typeof ifMatch === 'string' ? ifMatch : undefined,
      });
      let result;
      try {
        result = await bus.requestRaw(r.subject, payload, {
          timeoutMs: spec.timeoutMs ?? config.REQUEST_TIMEOUT_MS,
          requestId: String(req.id),
          idempotencyKey: typeof idempotencyKey === 'string' ? idempotencyKey : undefined,
          // what starts sessions says who asked: the playground holds each caller to a quota
          caller: r.expensive ? callerOf(req) : undefined,
        });
      } catch (err) {
        const meaning = spec.noResponders;
        if (meaning && err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE' && bus.isConnected()) {
          throw new AppError(meaning.code, meaning.message);
        }
        throw err;
      }
      if (result.headers?.get(Headers.idempotentReplayed)) reply.header('idempotent-replayed', 'true');
      if (spec.etag) {
        const etag = result.headers?.get(Headers.etag);
        if (etag) reply.header('etag', etag);
      }
      // The service's reply is already contract-shaped JSON: pass its bytes on without re-serializing.
      return reply
        .code(r.status ?? 200)
        .type('application/json; charset=utf-8')
        .send(Buffer.from(result.data.buffer, result.data.byteOffset, result.data.byteLength));
    },
  });
}
