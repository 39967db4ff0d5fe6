import { context, propagation, ROOT_CONTEXT, trace, type Span } from '@opentelemetry/api';
import { lazyChild, type Logger } from '@vab/bus';
import {
  capConnections,
  DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
  methodLabel,
  processMetrics,
  type AccessLog,
} from '@vab/service-kit';
import { AppError, statusOfError } from '@vab/contracts';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { errorHandler } from './errors.js';
import { drainOversizedBodies, registerJsonBodies } from './json-body.js';
import { registerSecurity, type SecurityConfig } from './security.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The HTTP edge of this API, whatever sits behind it: request ids, one access line per request, the one
 * error shape, JSON-only bodies, and security (headers, CORS, tokens, rate limits). The gateway is this edge
 * plus one NATS request per route; the benchmark's monolith baseline mounts the same edge over the agents
 * handlers (bench/monolith.mjs), so the two differ only by the bus.
 */
export async function createEdge(opts: {
  log: Logger;
  accessLog: AccessLog;
  bodyLimitBytes: number;
  security: SecurityConfig;
  /** How long a request (headers and body) may take to arrive; 408 after (default 30 s). */
  receiveTimeoutMs?: number | undefined;
  /** Connections one address may hold open at once; more are closed on accept (0: no cap; default 256). */
  maxConnectionsPerAddress?: number | undefined;
  /** Whether spans are recorded (service-kit's `startTracing`); off, a caller's trace context still travels. */
  tracing?: { enabled: boolean } | undefined;
  /** A request's URL as routed (Fastify's `rewriteUrl`): the live domain's hosts (live-page.ts). */
  rewriteUrl?: ((req: IncomingMessage) => string) | undefined;
}): Promise<FastifyInstance> {
  const { log, accessLog } = opts;
  const receiveTimeoutMs = opts.receiveTimeoutMs ?? DEFAULT_RECEIVE_TIMEOUT_MS;
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    bodyLimit: opts.bodyLimitBytes,
    // Node's own bounds on a request's arrival: a body that trickles or stalls is cut off with a 408 once the
    // whole request has taken longer than this (Fastify turns it off by default). Checked this often, so it
    // is cut off within 1.5 × the timeout; an answer that streams (an event stream) is not bounded by it.
    requestTimeout: receiveTimeoutMs,
    http: { connectionsCheckingInterval: Math.max(100, Math.min(5000, Math.floor(receiveTimeoutMs / 2))) },
    clientErrorHandler,
    // One line per request from our onResponse hook instead of Fastify's two; one name for the request id
    // on every line of every service (the services' `requestId`).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    childLoggerFactory: (logger, bindings) => lazyChild(logger as Logger, bindings) as FastifyBaseLogger,
    requestIdHeader: 'x-request-id',
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    // router-level failures (an over-long or malformed path) answer in the same error shape as the rest
    frameworkErrors: (err, req, reply) => {
      void errorHandler(err, req, reply);
    },
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: true,
    ...(opts.rewriteUrl ? { rewriteUrl: opts.rewriteUrl } : {}),
  });

  // headers must arrive within the same bound (Node's default is 60 s; it may not exceed requestTimeout)
  app.server.headersTimeout = Math.min(app.server.headersTimeout, receiveTimeoutMs);
  capConnections(app.server, opts.maxConnectionsPerAddress ?? DEFAULT_MAX_CONNECTIONS_PER_ADDRESS);
  // Node takes its error listener off a socket it hands to an 'upgrade' listener (ours, or the upstream
  // proxy's): a client that resets it while the edge's hooks run (a ticket's check is a bus request) would
  // then be an unhandled 'error', which ends the process. A socket's error destroys it already.
  app.server.on('connection', (socket: Socket) => socket.on('error', ignoreSocketError));

  // first: a caller's trace context is entered before any other hook runs
  await traceRequests(app, opts.tracing?.enabled ?? false);

  // JSON bodies only, checked before parsing (json-body.ts); one over the limit is read before its 413
  registerJsonBodies(app);
  drainOversizedBodies(app);
  // Route schemas are the contracts' zod schemas: validated with zod, documented from the same schemas.
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler(errorHandler);
  answerUnrouted(app);
  const duration = processMetrics().httpServerDuration;
  app.addHook('onResponse', (req, reply, done) => {
    // Fastify builds `routeOptions` anew on every read: once here
    const { url: route, config } = req.routeOptions;
    // the route's pattern (bounded), never the path: a path carries ids; no route matched: empty
    duration.observe(
      {
        http_route: route ?? '',
        http_request_method: methodLabel(req.method),
        http_response_status_code: reply.statusCode,
      },
      reply.elapsedTime / 1000,
    );
    accessLog.request({
      requestId: String(req.id),
      method: req.method,
      // a proxied request's route is a wildcard: its path says more
      url: (!config.proxied && route) || req.url.split('?')[0]!,
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime),
    });
    done();
  });
  await registerSecurity(app, opts.security);
  return app;
}

export const DEFAULT_RECEIVE_TIMEOUT_MS = 30_000;
const ignoreSocketError = () => undefined;
/**
 * Node's own answers to a request it could not read (a malformed request line 400, headers past its limit
 * 431, a request that did not arrive in time 408), in this API's error shape instead of Fastify's.
 */
function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const appErr =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new AppError('REQUEST_TIMEOUT', 'the request did not arrive in time: it was cut off')
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? new AppError('HEADERS_TOO_LARGE', "the request's headers are too large")
        : new AppError('VALIDATION_FAILED', 'the request is not valid HTTP');
  const status = statusOfError(appErr);
  const requestId = randomUUID();
  this.log.info({ code: appErr.code, requestId }, 'request rejected');
  const body = JSON.stringify({ ...appErr.toBody(), requestId });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/**
 * A request no route takes: 405 with `Allow` when its path is served under other methods, else 404; both
 * in the one error shape.
 */
function answerUnrouted(app: FastifyInstance): void {
  // Which methods each path serves, for a 405's `Allow` (a proxy's catch-all serves every path: not here).
  const served: { pattern: RegExp; methods: Set<string> }[] = [];
  app.addHook('onRoute', (route) => {
    if (route.config?.proxied || route.url.includes('*')) return;
    const source = route.url
      .split('/')
      .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    const pattern = new RegExp(`^${source}/?$`);
    const entry = served.find((e) => e.pattern.source === pattern.source);
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (entry) for (const m of methods) entry.methods.add(m);
    else served.push({ pattern, methods: new Set(methods) });
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]!;
    const allowed = new Set(served.filter((e) => e.pattern.test(path)).flatMap((e) => [...e.methods]));
    // a served method that reached no route went to a path no route has (`/live/shop/`, a trailing slash):
    // not a method's fault, and a 405 whose Allow names the method sent would contradict itself
    if (allowed.size > 0 && req.method !== 'OPTIONS' && !allowed.has(req.method)) {
      const allow = [...allowed].sort().join(', ');
      void reply.header('allow', allow);
      return errorHandler(
        new AppError('METHOD_NOT_ALLOWED', `${req.method} is not served on ${path}; allowed: ${allow}`),
        req,
        reply,
      );
    }
    return errorHandler(new AppError('ROUTE_NOT_FOUND', `no route ${req.method} ${path}`), req, reply);
  });
}

/** What is not an API request: probes and scrapes would fill a trace store with noise. */
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * One trace per API request. Tracing on: @fastify/otel's request span (named `METHOD /route`, the path
 * without its query), child of the caller's `traceparent` when it sent a valid one, a new trace otherwise;
 * the handler's bus requests are its children. Tracing off: no span at all, but a caller's valid
 * `traceparent` becomes the request's context, so its trace id is on every log line here and goes on over
 * the bus; a request without one costs nothing (no async context is entered).
 */
async function traceRequests(app: FastifyInstance, enabled: boolean): Promise<void> {
  // every answer carries its request id; with tracing off the same hook enters a caller's trace context
  // (one hook, not two: each costs its request a step of Fastify's hook runner)
  if (!enabled) {
    app.addHook('onRequest', (req, reply, done) => {
      reply.header('x-request-id', String(req.id));
      if (req.headers.traceparent === undefined) return done();
      const ctx = propagation.extract(ROOT_CONTEXT, req.headers);
      if (trace.getSpanContext(ctx) === undefined) return done();
      context.with(ctx, done);
    });
    return;
  }
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', String(req.id));
    done();
  });
  // loaded only when tracing is on (it brings OpenTelemetry's instrumentation machinery)
  const { FastifyOtelInstrumentation } = (await import('@fastify/otel')).default;
  const otel = new FastifyOtelInstrumentation({
    registerOnInitialization: false,
    // the route's own hooks (security, CORS, rate limits) are microseconds each: one span per request
    instrumentHooks: false,
    ignorePaths: ({ url }) => UNTRACED.has(url.split('?')[0]!),
    requestHook: (span: Span, req) => {
      const path = req.url.split('?')[0]!;
      span.updateName(`${req.method} ${req.routeOptions.url ?? path}`);
      span.setAttribute('url.path', path);
    },
  });
  await app.register(otel.plugin());
}
