import cors from '@fastify/cors';
import helmet from 'helmet';
import rateLimit from '@fastify/rate-limit';
import { AppError } from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { createHash, timingSafeEqual } from 'node:crypto';

export interface SecurityConfig {
  /** Bearer tokens that may call /api/*; empty: the API is open (a warning is logged at start). */
  apiTokens: string[];
  /** Origins allowed by CORS; empty: no cross-origin access. */
  corsOrigins: string[];
  rateLimitMax: number;
  rateLimitWindowMs: number;
  /** The stricter limit of routes that start sessions (they spend the operator's money). */
  sessionRateLimitMax: number;
  /** Shared store so limits hold across gateway instances; without it each instance counts alone. */
  rateLimitRedis?: Redis | undefined;
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Compares digests (fixed length) in constant time, against every token, so timing tells nothing. */
export function tokenMatcher(tokens: string[]): (presented: string) => boolean {
  const known = tokens.map(digest);
  return (presented) => {
    const d = digest(presented);
    let ok = false;
    for (const k of known) ok = timingSafeEqual(d, k) || ok;
    return ok;
  };
}

const isApi = (req: FastifyRequest) => req.url.startsWith('/api/');

function bearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  return typeof h === 'string' && h.startsWith('Bearer ') ? h.slice(7).trim() : undefined;
}

/**
 * Who may call and how often: optional API tokens on /api/* (health and docs stay open), CORS with an
 * allow-list, security headers, and rate limits (stricter on session starts) with Retry-After.
 */
export async function registerSecurity(app: FastifyInstance, config: SecurityConfig): Promise<void> {
  const headers = securityHeaders();
  app.addHook('onRequest', (_req, reply, done) => {
    reply.headers(headers);
    done();
  });
  await app.register(cors, {
    origin: config.corsOrigins.length > 0 ? config.corsOrigins : false,
    methods: ['GET', 'POST', 'PATCH', 'DELETE'],
    allowedHeaders: ['content-type', 'authorization', 'if-match', 'idempotency-key', 'x-request-id'],
    exposedHeaders: ['etag', 'x-request-id', 'retry-after'],
    maxAge: 600,
  });

  if (config.apiTokens.length === 0) {
    app.log.warn('API_TOKENS is not set: the API is open to anyone who can reach it');
  } else {
    const matches = tokenMatcher(config.apiTokens);
    app.addHook('onRequest', async (req) => {
      if (!isApi(req) || req.method === 'OPTIONS') return;
      const token = bearer(req);
      if (token === undefined || !matches(token))
        throw new AppError('UNAUTHORIZED', 'authentication required');
    });
  }

  await app.register(rateLimit, {
    global: true,
    max: config.rateLimitMax,
    timeWindow: config.rateLimitWindowMs,
    hook: 'onRequest',
    allowList: (req) => !isApi(req),
    // by caller: the token when there is one (hashed), else the address
    keyGenerator: (req) => {
      const token = bearer(req);
      return token ? `t:${digest(token).toString('base64url').slice(0, 22)}` : `ip:${req.ip}`;
    },
    ...(config.rateLimitRedis ? { redis: config.rateLimitRedis, nameSpace: 'gw-rl:' } : {}),
    // a Redis outage must not take the API down with it: requests pass uncounted meanwhile
    skipOnError: true,
    errorResponseBuilder: (_req, ctx) =>
      new AppError(
        'RATE_LIMITED',
        `too many requests: at most ${ctx.max} per ${ctx.after}, retry after that`,
      ),
  });
}

/**
 * helmet's headers with its defaults (CSP off: JSON responses need none and the docs page sets its own),
 * computed once. They are the same on every response, and running helmet's dozen middlewares per request
 * cost ~2 % of the gateway's CPU under load (docs/performance.md).
 */
export function securityHeaders(): Record<string, string> {
  const headers: Record<string, string> = {};
  const recorder = {
    setHeader: (name: string, value: unknown) => void (headers[name.toLowerCase()] = String(value)),
    removeHeader: () => undefined,
  };
  helmet({ contentSecurityPolicy: false })({} as never, recorder as never, () => undefined);
  if (Object.keys(headers).length === 0) throw new Error('helmet set no headers');
  return headers;
}

export const sessionRateLimit = (config: SecurityConfig) => ({
  max: config.sessionRateLimitMax,
  timeWindow: config.rateLimitWindowMs,
});
