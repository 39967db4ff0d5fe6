import cors from '@fastify/cors';
import helmet from 'helmet';
import rateLimit from '@fastify/rate-limit';
import { AppError } from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
import { createHash, timingSafeEqual } from 'node:crypto';
import { TICKET_PARAM, type Tickets } from './tickets.js';

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
  /** The methods CORS allows: every method the routes serve (OPTIONS added). */
  corsMethods?: string[];
  /** Single-use tickets a GET may carry instead of a bearer token (EventSource, WebSocket). */
  tickets?: Tickets | undefined;
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

/** The ticket each request carried, taken off its URL before anything else sees it. */
const ticketOf = new WeakMap<FastifyRequest, string>();

/**
 * Takes `?ticket=` off the request, wherever it is going, so that it reaches no log line, no route's
 * query validation and no upstream; the auth hook reads it from `ticketOf`.
 */
function takeTicket(req: FastifyRequest): void {
  const url = req.raw.url ?? '';
  const q = url.indexOf('?');
  if (q < 0 || !url.includes(`${TICKET_PARAM}=`, q)) return;
  // the other parameters go on byte for byte (no re-encoding of what the upstream reads)
  const parts = url.slice(q + 1).split('&');
  const isTicket = (part: string) => part.startsWith(`${TICKET_PARAM}=`);
  const found = parts.find(isTicket);
  if (found === undefined) return;
  let ticket: string;
  try {
    ticket = decodeURIComponent(found.slice(TICKET_PARAM.length + 1).replace(/\+/g, ' '));
  } catch {
    ticket = '';
  }
  const rest = parts.filter((part) => !isTicket(part)).join('&');
  req.raw.url = url.slice(0, q) + (rest ? `?${rest}` : '');
  const query = req.query as Record<string, unknown> | undefined;
  if (query && typeof query === 'object') delete query[TICKET_PARAM];
  ticketOf.set(req, ticket);
}

/** What a window of milliseconds reads as in a 429's message. */
export function windowText(ms: number): string {
  if (ms % 3_600_000 === 0) return ms === 3_600_000 ? 'hour' : `${ms / 3_600_000} hours`;
  if (ms % 60_000 === 0) return ms === 60_000 ? 'minute' : `${ms / 60_000} minutes`;
  if (ms % 1000 === 0) return ms === 1000 ? 'second' : `${ms / 1000} seconds`;
  return `${ms} ms`;
}

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
  // one hook for both: each hook is a step of Fastify's runner on every request
  app.addHook('onRequest', (req, reply, done) => {
    takeTicket(req);
    reply.headers(isPage(req.url) ? pageHeaders : apiSecurityHeaders);
    done();
  });
  await app.register(cors, {
    origin: config.corsOrigins.length > 0 ? config.corsOrigins : false,
    methods: config.corsMethods ?? ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    allowedHeaders: ['content-type', 'authorization', 'if-match', 'idempotency-key', 'x-request-id'],
    exposedHeaders: ['etag', 'x-request-id', 'retry-after'],
    // how long a browser may reuse a preflight's answer (seconds): one preflight per path per 10 minutes
    maxAge: 600,
  });

  if (config.apiTokens.length === 0) {
    app.log.warn({ code: 'API_OPEN' }, 'API_TOKENS is not set: the API is open to anyone who can reach it');
  } else {
    const matches = tokenMatcher(config.apiTokens);
    const tickets = config.tickets;
    app.addHook('onRequest', async (req) => {
      if (isOpen(req) || req.method === 'OPTIONS') return;
      const token = bearer(req);
      const ticket = ticketOf.get(req);
      if (token === undefined && ticket !== undefined && tickets && req.method === 'GET') {
        if (await tickets.redeem(ticket, req.url.split('?')[0]!)) return;
        throw new AppError(
          'UNAUTHORIZED',
          'the ticket is not valid here: expired, used, or for another path',
        );
      }
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
        `too many requests: at most ${ctx.max} per ${windowText(config.rateLimitWindowMs)}; retry in ${ctx.after}`,
      ),
  });
}

/** The HTML pages this gateway serves (the API reference, the console); everything else answers JSON. */
export const DOCS_PREFIX = '/docs';
export const CONSOLE_PREFIX = '/console';
const PAGE_PREFIXES = [DOCS_PREFIX, CONSOLE_PREFIX].map((p) => ({ page: p, below: `${p}/`, query: `${p}?` }));
// asked on every request: the prefixes are made once, not per call
const isPage = (url: string) =>
  PAGE_PREFIXES.some((p) => url === p.page || url.startsWith(p.below) || url.startsWith(p.query));

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
