import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { NatsConnection } from '@nats-io/transport-node';
import { BusClient, type Logger } from '@vab/bus';
import { createAccessLog, type AccessLog } from '@vab/service-kit';
import {
  AppError,
  Headers,
  healthSubjectOf,
  HttpErrorBody,
  IfMatch,
  ServiceNames,
  SessionEvent,
  SessionEventsQuery,
  specOf,
  Subjects,
  TestSessionParams,
} from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { loadConfig, securityOf, type GatewayConfig } from './config.js';
import { registerConsole } from './console.js';
import { createEdge } from './edge.js';
import { DEFAULT_EVENT_STREAMS, EventStreams, lastEventIdOf, type EventStreamSettings } from './events.js';
import { operationIdOf, responsesOf, swaggerOptions } from './openapi.js';
import { registerUpstream } from './proxy.js';
import { routes, type AnyRoute } from './route-table.js';
import { DOCS_PREFIX, sessionRateLimit, type SecurityConfig } from './security.js';

export type AppConfig = Pick<GatewayConfig, 'BODY_LIMIT_BYTES' | 'REQUEST_TIMEOUT_MS' | 'READY_TIMEOUT_MS'> &
  Partial<Pick<GatewayConfig, 'UPSTREAM_URL' | 'UPSTREAM_TIMEOUT_MS'>> & {
    security?: Partial<SecurityConfig>;
    events?: Partial<EventStreamSettings>;
  };

/** What an app factory caller does not set: the configuration's defaults (no tokens, no CORS). */
const DEFAULT_SECURITY: SecurityConfig = securityOf(loadConfig({}));

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
}): Promise<FastifyInstance> {
  const { nc, log, config } = deps;
  const accessLog = deps.accessLog ?? createAccessLog('gateway', log.level);
  const bus = new BusClient(nc);
  const security = { ...DEFAULT_SECURITY, ...config.security };
  const app = await createEdge({ log, accessLog, bodyLimitBytes: config.BODY_LIMIT_BYTES, security });

  const maxPayload = nc.info?.max_payload;
  if (maxPayload !== undefined && config.BODY_LIMIT_BYTES > maxPayload - 64 * 1024) {
    log.warn(
      { bodyLimit: config.BODY_LIMIT_BYTES, maxPayload },
      'BODY_LIMIT_BYTES exceeds the NATS max_payload: larger bodies will answer 413 from the bus check',
    );
  }

  await app.register(swagger, swaggerOptions(routes));
  await app.register(swaggerUi, { routePrefix: DOCS_PREFIX, staticCSP: true });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  registerConsole(app);
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
            { timeoutMs: config.READY_TIMEOUT_MS, requestId: String(req.id) },
          );
          return [service, 'up'] as const;
        } catch (err) {
          return [service, err instanceof AppError ? err.code : 'error'] as const;
        }
      }),
    );
    const ready = connected && checks.every(([, s]) => s === 'up');
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'not ready',
      bus: connected ? 'connected' : 'disconnected',
      services: Object.fromEntries(checks),
    });
  });

  const streams = new EventStreams({
    nc,
    bus,
    log,
    settings: { ...DEFAULT_EVENT_STREAMS, ...config.events },
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
  });
  // open streams would hold close() until its timeout: they end first, and clients resume elsewhere
  app.addHook('preClose', (done) => {
    streams.closeAll();
    // a connection that never sends a request (a browser's preconnect) would hold close() for its headers
    // timeout: in-flight requests get their own timeout to finish, then whatever is left is closed
    setTimeout(() => app.server.closeAllConnections(), config.REQUEST_TIMEOUT_MS).unref();
    done();
  });
  registerEventsRoute(app, streams);
  for (const r of routes) registerRoute(app, bus, r, config, security, streams);
  if (config.UPSTREAM_URL) {
    await registerUpstream(app, {
      url: config.UPSTREAM_URL,
      timeoutMs: config.UPSTREAM_TIMEOUT_MS ?? 30_000,
    });
    log.info(
      { upstream: new URL(config.UPSTREAM_URL).origin },
      'requests outside the route table go upstream',
    );
  }
  return app;
}

/**
 * The API document, made as the running gateway makes it (the same routes and schemas) without a bus:
 * what `npm run generate` writes to docs/openapi.json for linting and for the typed client.
 */
export async function apiDocument(): Promise<Record<string, unknown>> {
  const { pino } = await import('pino');
  const log = pino({ level: 'silent' });
  const config = loadConfig({});
  const app = await createEdge({
    log,
    accessLog: { request: () => undefined },
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    security: DEFAULT_SECURITY,
  });
  await app.register(swagger, swaggerOptions(routes));
  registerEventsRoute(app, undefined);
  for (const r of routes) registerRoute(app, undefined, r, config, DEFAULT_SECURITY, undefined);
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

/** Whether a request asks for the Server-Sent Events form of a route that has one. */
const wantsEvents = (req: FastifyRequest) => /\btext\/event-stream\b/.test(req.headers.accept ?? '');

/** A session's events as Server-Sent Events: not a request/reply route, so not in the route table. */
function registerEventsRoute(app: FastifyInstance, streams: EventStreams | undefined): void {
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
      response: {
        200: {
          description:
            'An event stream: `id: <event id>`, `event: <type>`, `data: <event JSON>`; `: ping` heartbeats',
          content: { 'text/event-stream': { schema: SessionEvent } },
        },
        ...Object.fromEntries(
          (
            [
              [400, 'VALIDATION_FAILED'],
              [401, 'UNAUTHORIZED'],
              [404, 'NOT_FOUND'],
              [429, 'RATE_LIMITED'],
              [503, 'SERVICE_UNAVAILABLE'],
            ] as const
          ).map(([status, code]) => [
            status,
            { description: `\`${code}\``, content: { 'application/json': { schema: HttpErrorBody } } },
          ]),
        ),
      },
    },
    handler: async (req, reply) => {
      if (!streams) throw new AppError('SERVICE_UNAVAILABLE', 'this gateway has no bus');
      const params = req.params as TestSessionParams;
      const after = lastEventIdOf(req, req.query as SessionEventsQuery);
      await streams.serve(req, reply, { agentId: params.id, sessionId: params.sessionId, after });
    },
  });
}

function registerRoute(
  app: FastifyInstance,
  /** Absent: a document-only app, whose routes are never called. */
  bus: BusClient | undefined,
  r: AnyRoute,
  config: AppConfig,
  security: SecurityConfig,
  streams: EventStreams | undefined,
): void {
  const headers = headersOf(r);
  const spec = specOf(r.subject);
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
      ...(r.body ? { body: r.bodyOptional ? r.body.nullish() : r.body } : {}),
      ...(headers ? { headers } : {}),
      response: responsesOf(r),
    },
    config: { api: r, ...(r.expensive ? { rateLimit: sessionRateLimit(security) } : {}) },
    handler: async (req: FastifyRequest, reply) => {
      if (!bus) throw new AppError('SERVICE_UNAVAILABLE', 'this gateway has no bus');
      if (r.subject === Subjects.textSessionTurn && streams && wantsEvents(req)) {
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
