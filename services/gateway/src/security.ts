import cors from '@fastify/cors';
import helmet from 'helmet';
import rateLimit from '@fastify/rate-limit';
import { AppError } from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
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
  rateLimitRedis?: Redis | Cluster | undefined;
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

/** Health, readiness and the API's documents are open; everything else (the API, anything proxied) is not. */
const OPEN_PATHS = new Set(['/healthz', '/readyz', '/openapi.json']);
const isOpen = (req: FastifyRequest) => {
  const path = req.url.split('?')[0]!;
  return OPEN_PATHS.has(path) || isPage(path);
};

function bearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  return typeof h === 'string' && h.startsWith('Bearer ') ? h.slice(7).trim() : undefined;
}

/**
 * Who may call and how often: optional API tokens on the API and anything proxied (health, readiness and
 * the docs stay open), CORS with an allow-list, security headers, and rate limits (stricter on session
 * starts) with Retry-After.
 */
export async function registerSecurity(app: FastifyInstance, config: SecurityConfig): Promise<void> {
  const pageHeaders = securityHeaders();
  app.addHook('onRequest', (req, reply, done) => {
    reply.headers(isPage(req.url) ? pageHeaders : apiSecurityHeaders);
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
      if (isOpen(req) || req.method === 'OPTIONS') return;
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
    allowList: (req) => isOpen(req),
    // by caller: the token when there is one (hashed), else the address
    keyGenerator: (req) => {
      const token = bearer(req);
      return token ? `t:${digest(token).toString('base64url').slice(0, 22)}` : `ip:${req.ip}`;
    },
    ...(config.rateLimitRedis ? { redis: config.rateLimitRedis, nameSpace: 'gw-rl:' } : {}),
    // a Redis outage must not take the API down with it: requests pass uncounted meanwhile
    skipOnError: true,
    // the limit headers go out with the 429 (with Retry-After), not on every answer under the limit
    addHeadersOnExceeding: {
      'x-ratelimit-limit': false,
      'x-ratelimit-remaining': false,
      'x-ratelimit-reset': false,
    },
    errorResponseBuilder: (_req, ctx) =>
      new AppError(
        'RATE_LIMITED',
        `too many requests: at most ${ctx.max} per ${ctx.after}, retry after that`,
      ),
  });
}

/** The HTML pages this gateway serves (the API reference, the console); everything else answers JSON. */
export const DOCS_PREFIX = '/docs';
export const CONSOLE_PREFIX = '/console';
const PAGE_PREFIXES = [DOCS_PREFIX, CONSOLE_PREFIX];
const isPage = (url: string) =>
  PAGE_PREFIXES.some((p) => url === p || url.startsWith(`${p}/`) || url.startsWith(`${p}?`));

/**
 * What OWASP's REST Security Cheat Sheet lists for every API response (Content-Type is set per answer).
 * helmet's other headers (referrer policy, DNS prefetch, COOP, origin-agent-cluster, the legacy IE and
 * Flash ones) only act on HTML documents: on JSON they are bytes every client parses on every response.
 */
const apiSecurityHeaders: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'content-security-policy': "frame-ancestors 'none'",
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
};

/**
 * helmet's headers with its defaults, for the HTML of the docs pages (CSP off: that page sets its own),
 * computed once: running helmet's dozen middlewares per request had a measurable cost under load
 * (docs/performance.md).
 */
function securityHeaders(): Record<string, string> {
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
