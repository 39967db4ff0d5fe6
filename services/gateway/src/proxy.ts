import httpProxy from '@fastify/http-proxy';
import { safeError } from '@vab/bus';
import { AppError } from '@vab/contracts';
import type { FastifyInstance } from 'fastify';

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
}

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
export async function registerUpstream(app: FastifyInstance, upstream: UpstreamConfig): Promise<void> {
  // its own context: the proxy passes bodies through raw, the API's routes keep their JSON-only parsing
  await app.register(async (proxied) => {
    proxied.removeAllContentTypeParsers();
    await proxied.register(httpProxy, {
      upstream: upstream.url,
      websocket: true,
      // CORS preflights are the edge's own
      httpMethods: ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT'],
      config: { proxied: true },
      undici: { headersTimeout: upstream.timeoutMs, bodyTimeout: 0 },
      replyOptions: {
        rewriteRequestHeaders: (req, headers) => ({ ...headers, 'x-request-id': String(req.id) }),
        onError: (reply, { error }) => {
          const failure = error as Error & { code?: string; statusCode?: number };
          reply.log.warn({ err: safeError(error), code: failure.code }, 'upstream failed');
          void reply.send(upstreamError(failure));
        },
      },
    });
  });
}
