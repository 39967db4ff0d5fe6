import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { NatsConnection } from '@nats-io/transport-node';
import { BusClient, type Logger } from '@vab/bus';
import { createAccessLog, type AccessLog } from '@vab/service-kit';
import { AppError, Headers, healthSubjectOf, IfMatch, ServiceNames, specOf } from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { loadConfig, securityOf, type GatewayConfig } from './config.js';
import { registerConsole } from './console.js';
import { createEdge } from './edge.js';
import { operationIdOf, responsesOf, swaggerOptions } from './openapi.js';
import { registerUpstream } from './proxy.js';
import { routes, type AnyRoute } from './route-table.js';
import { DOCS_PREFIX, sessionRateLimit, type SecurityConfig } from './security.js';

export type AppConfig = Pick<GatewayConfig, 'BODY_LIMIT_BYTES' | 'REQUEST_TIMEOUT_MS' | 'READY_TIMEOUT_MS'> &
  Partial<Pick<GatewayConfig, 'UPSTREAM_URL' | 'UPSTREAM_TIMEOUT_MS'>> & {
    security?: Partial<SecurityConfig>;
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

  for (const r of routes) registerRoute(app, bus, r, config, security);
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
  for (const r of routes) registerRoute(app, undefined, r, config, DEFAULT_SECURITY);
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

function registerRoute(
  app: FastifyInstance,
  /** Absent: a document-only app, whose routes are never called. */
  bus: BusClient | undefined,
  r: AnyRoute,
  config: AppConfig,
  security: SecurityConfig,
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
