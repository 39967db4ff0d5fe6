import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { NatsConnection } from '@nats-io/transport-node';
import { BusClient, createAccessLog, type AccessLog, type Logger } from '@vab/bus';
import { AppError, Headers, healthSubjectOf, ServiceNames, toFieldIssues } from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { loadConfig, securityOf, type GatewayConfig } from './config.js';
import { createEdge } from './edge.js';
import { buildOpenApi } from './openapi.js';
import { routes, type AnyRoute } from './route-table.js';
import { DOCS_PREFIX, sessionRateLimit, type SecurityConfig } from './security.js';

export type AppConfig = Pick<
  GatewayConfig,
  'BODY_LIMIT_BYTES' | 'REQUEST_TIMEOUT_MS' | 'READY_TIMEOUT_MS'
> & {
  security?: Partial<SecurityConfig>;
};

/** What an app factory caller does not set: the configuration's defaults (no tokens, no CORS). */
const DEFAULT_SECURITY: SecurityConfig = securityOf(loadConfig({}));

const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{1,200}$/;

function parseInput<T>(schema: z.ZodType<T>, value: unknown, where: 'params' | 'body'): T {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new AppError('VALIDATION_FAILED', `invalid ${where}`, {
      issues: toFieldIssues(result.error, where),
    });
  }
  return result.data;
}

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

  const document = buildOpenApi(routes);
  await app.register(swagger, { mode: 'static', specification: { document: document as never } });
  await app.register(swaggerUi, { routePrefix: DOCS_PREFIX, staticCSP: true });
  app.get('/openapi.json', { schema: { hide: true } }, async () => document);

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
  return app;
}

function registerRoute(
  app: FastifyInstance,
  bus: BusClient,
  r: AnyRoute,
  config: AppConfig,
  security: SecurityConfig,
): void {
  app.route({
    method: r.method,
    url: r.url,
    schema: { hide: true },
    ...(r.expensive ? { config: { rateLimit: sessionRateLimit(security) } } : {}),
    handler: async (req: FastifyRequest, reply) => {
      const params = r.params ? parseInput(r.params, req.params, 'params') : {};
      let body: unknown = undefined;
      if (r.body) {
        const raw = req.body === undefined && r.bodyOptional ? {} : req.body;
        body = parseInput(r.body, raw, 'body');
      }
      const ifMatch = r.etag ? req.headers['if-match'] : undefined;
      const idempotencyKey = r.idempotent ? req.headers['idempotency-key'] : undefined;
      if (
        idempotencyKey !== undefined &&
        (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey))
      ) {
        throw new AppError('VALIDATION_FAILED', 'invalid Idempotency-Key', {
          issues: [
            {
              path: 'headers.idempotency-key',
              message: 'must be 1–200 characters of letters, digits and -_.:',
            },
          ],
        });
      }
      const payload = r.toRequest({
        params,
        body,
        ifMatch: typeof ifMatch === 'string' ? ifMatch : undefined,
      });
      let result;
      try {
        result = await bus.requestRaw(r.subject, payload, {
          timeoutMs: r.timeoutMs ?? config.REQUEST_TIMEOUT_MS,
          requestId: String(req.id),
          idempotencyKey,
        });
      } catch (err) {
        if (
          r.noResponders &&
          err instanceof AppError &&
          err.code === 'SERVICE_UNAVAILABLE' &&
          bus.isConnected()
        ) {
          throw new AppError(r.noResponders.code, r.noResponders.message);
        }
        throw err;
      }
      if (result.headers?.get(Headers.idempotentReplayed)) reply.header('idempotent-replayed', 'true');
      if (r.etag) {
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
