import cors from '@fastify/cors';
import helmet from 'helmet';
import rateLimit from '@fastify/rate-limit';
import { AppError, LIVE_PREFIX, PUBLIC_KEY_PREFIX } from '@vab/contracts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
import { createHash, timingSafeEqual } from 'node:crypto';
import { addressKey } from '@vab/service-kit';
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
  /**
   * Requests without a valid token one address may make per window (`rateLimitWindowMs`); past it every
   * request from that address answers 429 until the window ends, a valid token's included, so a guess that
   * happens to be right is not told apart from a wrong one.
   */
  authFailureLimitMax: number;
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

/** The ticket a request carried (taken out of its URL on arrival), for routes that redeem their own (/live). */
export const ticketOfRequest = (req: FastifyRequest): string | undefined => ticketOf.get(req);

/** What a window of milliseconds reads as in a 429's message. */
export function windowText(ms: number): string {
  if (ms % 3_600_000 === 0) return ms === 3_600_000 ? 'hour' : `${ms / 3_600_000} hours`;
  if (ms % 60_000 === 0) return ms === 60_000 ? 'minute' : `${ms / 60_000} minutes`;
  if (ms % 1000 === 0) return ms === 1000 ? 'second' : `${ms / 1000} seconds`;
  return `${ms} ms`;
}

// RFC 7235: the scheme is case-insensitive (`bearer`, `BEARER`)
const BEARER = /^bearer +/i;
export function bearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  if (typeof h !== 'string' || !BEARER.test(h)) return undefined;
  return h.replace(BEARER, '').trim();
}

/** Who a request is, once the auth hook has run: `t:<token digest>` for a valid token, else `ip:<address>`. */
const callers = new WeakMap<FastifyRequest, string>();
/**
 * The caller a request counts against for rate limits, quotas and stream caps: the identity of a valid
 * bearer token (or of the token a ticket was made with), else the address. A token the gateway does not
 * accept (or any token while the API is open) is no identity: it would let one address be any number of
 * callers.
 */
export const callerOf = (req: FastifyRequest): string => callers.get(req) ?? `ip:${addressKey(req.ip)}`;
export const tokenIdentity = (token: string): string =>
  `t:${digest(token).toString('base64url').slice(0, 22)}`;

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
  const corsOptions = {
    origin: config.corsOrigins.length > 0 ? config.corsOrigins : false,
    methods: config.corsMethods ?? ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    allowedHeaders: ['content-type', 'authorization', 'if-match', 'idempotency-key', 'x-request-id'],
    exposedHeaders: ['etag', 'x-request-id', 'retry-after'],
    // how long a browser may reuse a preflight's answer (seconds): one preflight per path per 10 minutes
    maxAge: 600,
  };
  // a live deploy's calls answer any origin (a widget on any site): the publishable key's allowed origins are
  // the gate, and a refusal must be readable by the page to be said in words
  const liveCallsCors = { ...corsOptions, origin: true, methods: ['POST', 'OPTIONS'] };
  await app.register(
    cors,
    () => (req: FastifyRequest, cb: (e: Error | null, o: typeof corsOptions) => void) =>
      cb(null, isLiveCalls(req.url) ? liveCallsCors : corsOptions),
  );

  // first: the auth hook below uses its store (createRateLimit) for failed attempts
  await app.register(rateLimit, {
    global: true,
    max: config.rateLimitMax,
    timeWindow: config.rateLimitWindowMs,
    hook: 'onRequest',
    allowList: (req) => isOpen(req),
    // by caller: a valid token's identity, else the address (the auth hook, which runs first, decides)
    keyGenerator: callerOf,
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

  // a publishable key (issue 45) is for /live routes only: anywhere else it is refused, even on an open API
  app.addHook('onRequest', async (req) => {
    const token = bearer(req);
    if (token?.startsWith(PUBLIC_KEY_PREFIX) && !isLive(req.url)) {
      throw new AppError('UNAUTHORIZED', 'a publishable key is accepted on /live routes only');
    }
  });
  if (config.apiTokens.length === 0) {
    app.log.warn({ code: 'API_OPEN' }, 'API_TOKENS is not set: the API is open to anyone who can reach it');
  } else {
    registerAuth(app, config);
  }
}

/**
 * API tokens (or a ticket) on everything but the open paths; failed attempts counted per address in the
 * rate limits' store (shared across gateways with Redis) and refused with 429 past `authFailureLimitMax`.
 * An app-level hook: it runs before the routes' rate-limit hooks, which read the caller it decides.
 */
function registerAuth(app: FastifyInstance, config: SecurityConfig): void {
  const matches = tokenMatcher(config.apiTokens);
  const tickets = config.tickets;
  const failures = app.createRateLimit({
    max: config.authFailureLimitMax,
    timeWindow: config.rateLimitWindowMs,
    keyGenerator: (req) => `af:${addressKey(req.ip)}`,
  });
  // addresses over the limit, until when: checked before the token, so a blocked address learns nothing
  const blocked = new Map<string, number>();
  const refuse = (reply: FastifyReply, until: number) => {
    const seconds = Math.max(1, Math.ceil((until - Date.now()) / 1000));
    void reply.header('retry-after', String(seconds));
    return new AppError(
      'RATE_LIMITED',
      `too many requests without a valid token from this address: at most ${config.authFailureLimitMax} per ${windowText(config.rateLimitWindowMs)}; retry in ${seconds} seconds`,
    );
  };
  const failed = async (req: FastifyRequest, reply: FastifyReply, error: AppError) => {
    const count = await failures(req);
    if (count.isAllowed || !count.isExceeded) return error;
    const until = Date.now() + Math.max(1000, count.ttl);
    // many addresses (an IPv6 range) must not grow it for ever: the expired go when it is large
    if (blocked.size >= 10_000) for (const [ip, t] of blocked) if (t <= Date.now()) blocked.delete(ip);
    blocked.set(addressKey(req.ip), until);
    return refuse(reply, until);
  };
  app.addHook('onRequest', async (req, reply) => {
    if (isOpen(req) || isLive(req.url) || req.method === 'OPTIONS') return;
    const address = addressKey(req.ip);
    const until = blocked.get(address);
    if (until !== undefined) {
      if (until > Date.now()) throw refuse(reply, until);
      blocked.delete(address);
    }
    const token = bearer(req);
    const ticket = ticketOf.get(req);
    if (token === undefined && ticket !== undefined && tickets && req.method === 'GET') {
      const redeemed = await tickets.redeem(ticket, req.url.split('?')[0]!);
      if (redeemed !== false) {
        if (redeemed.caller !== undefined) callers.set(req, redeemed.caller);
        return;
      }
      throw await failed(
        req,
        reply,
        new AppError('UNAUTHORIZED', 'the ticket is not valid here: expired, used, or for another path'),
      );
    }
    if (token === undefined || !matches(token)) {
      throw await failed(req, reply, new AppError('UNAUTHORIZED', 'authentication required'));
    }
    callers.set(req, tokenIdentity(token));
  });
}

/**
 * The public surface of live deploys (the talk page, the widget, public calls): no builder token there (the
 * API's tokens are builders'); still rate limited per address like every route.
 */
/** `POST /live/:subdomain/calls` (and its preflight). */
const isLiveCalls = (url: string) => /^\/live\/[a-z0-9-]+\/calls(\?|$)/.test(url);

const isLive = (url: string) =>
  url === LIVE_PREFIX || url.startsWith(`${LIVE_PREFIX}/`) || url.startsWith(`${LIVE_PREFIX}?`);

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
