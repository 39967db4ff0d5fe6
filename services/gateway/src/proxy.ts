import httpProxy from '@fastify/http-proxy';
import { safeError } from '@vab/bus';
import { AppError } from '@vab/contracts';
import type { AccessLog } from '@vab/service-kit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { connect } from 'node:net';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route is the proxy's catch-all (UPSTREAM_URL). */
    proxied?: boolean;
  }
}

export interface UpstreamConfig {
  url: string;
  /** How long a proxied request waits for the upstream's answer to begin. */
  timeoutMs: number;
  /** Send the caller's `Authorization` on (else it is removed: it is this API's credential). */
  forwardAuthorization?: boolean;
}

/** What the proxy takes on (CORS preflights are the edge's own). */
export const PROXY_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT'] as const;

/** What reply-from says when the upstream failed, as this API's error: a timeout 504, anything else 502. */
function upstreamError(error: { code?: string; statusCode?: number }): AppError {
  return error.statusCode === 504
    ? new AppError('TIMEOUT', 'the upstream backend did not answer in time')
    : new AppError('UPSTREAM_FAILED', 'the upstream backend could not be reached');
}

/**
 * The fallback for a team moving to this backend beside the one it has: every request the route table
 * does not serve — any method, any path, streamed answers and WebSocket upgrades — goes to `UPSTREAM_URL`
 * with @fastify/http-proxy. It runs on the same edge, so the hooks registered before it (request id,
 * access log, security headers, API tokens, rate limits) apply to it as to the API's own routes.
 */
export async function registerUpstream(
  app: FastifyInstance,
  upstream: UpstreamConfig,
  accessLog: AccessLog,
): Promise<void> {
  const withoutAuthorization = (headers: Record<string, unknown>) => {
    if (upstream.forwardAuthorization) return headers;
    const { authorization: _ours, ...rest } = headers;
    return rest;
  };
  const target = new URL(upstream.url);
  const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
  // its own context: the proxy passes bodies through raw, the API's routes keep their JSON-only parsing
  await app.register(async (proxied) => {
    proxied.removeAllContentTypeParsers();
    await proxied.register(httpProxy, {
      upstream: upstream.url,
      websocket: true,
      // CORS preflights are the edge's own
      httpMethods: [...PROXY_METHODS],
      config: { proxied: true },
      undici: { headersTimeout: upstream.timeoutMs, bodyTimeout: 0 },
      // A WebSocket upgrade is accepted only once the upstream takes a connection: else it answers our
      // 502 like any request (the proxy would accept it, then close with the upstream's address as reason).
      preHandler: (req, _reply, done) => {
        if (!isUpgrade(req)) {
          done();
          return;
        }
        reachable(target.hostname, port, upstream.timeoutMs).then(
          () => {
            logUpgrade(req, accessLog);
            done();
          },
          (err: unknown) => {
            req.log.warn({ code: 'UPSTREAM_FAILED', err: safeError(err) }, 'upstream failed');
            const failed = new AppError('UPSTREAM_FAILED', 'the upstream backend could not be reached');
            done(Object.assign(failed, { cause: err }));
          },
        );
      },
      // the library's option, missing from its types; by default a WebSocket carries only the cookie on
      wsClientOptions: {
        rewriteRequestHeaders: (headers: Record<string, string>, req: FastifyRequest) =>
          withoutAuthorization({
            ...headers,
            ...(req.headers.cookie ? { cookie: req.headers.cookie } : {}),
            ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
            'x-request-id': String(req.id),
          }),
      } as object,
      replyOptions: {
        rewriteRequestHeaders: (req, headers) =>
          withoutAuthorization({ ...headers, 'x-request-id': String(req.id) }) as typeof headers,
        onError: (reply, { error }) => {
          const failure = error as Error & { code?: string; statusCode?: number };
          reply.log.warn(
            { code: 'UPSTREAM_FAILED', err: safeError(error), errno: failure.code },
            'upstream failed',
          );
          void reply.send(upstreamError(failure));
        },
      },
    });
  });
}

const isUpgrade = (req: FastifyRequest) => req.headers.upgrade?.toLowerCase() === 'websocket';

/** Whether the upstream takes a TCP connection within `timeoutMs`. */
function reachable(host: string, port: number, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: timeoutMs });
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('timeout', () => {
      socket.destroy();
      reject(new Error('connect timed out'));
    });
    socket.once('error', reject);
  });
}

/**
 * A proxied WebSocket is hijacked from Fastify, so its onResponse (the access line) never runs: its line is
 * written here when the socket closes, with 101 and how long it stayed open.
 */
function logUpgrade(req: FastifyRequest, accessLog: AccessLog): void {
  const started = performance.now();
  req.raw.socket.once('close', () => {
    accessLog.request({
      requestId: String(req.id),
      method: req.method,
      url: req.url.split('?')[0]!,
      status: 101,
      ms: Math.round(performance.now() - started),
    });
  });
}
