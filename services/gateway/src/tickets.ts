import type { NatsConnection } from '@nats-io/transport-node';
import { kvUsedOnce } from '@vab/bus';
import { AppError, HttpErrorBody } from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createSignedTokens } from '@vab/service-kit';
import { hkdfSync, randomBytes } from 'node:crypto';
import { z } from 'zod';

/**
 * Single-use tickets: how a browser authenticates what it cannot put an `Authorization` header on (an
 * EventSource, a WebSocket). The page asks `POST /api/tickets` (with its bearer token) for a ticket to one
 * path, then opens that path with `?ticket=…` within TICKET_TTL_MS. A ticket is HMAC-signed with a key
 * derived from the API tokens, so every gateway sharing API_TOKENS accepts it with no new secret, and its id
 * is recorded in a JetStream key-value bucket on use (`create` fails when the key exists), so it opens one
 * request across every gateway instance. The exception is a recording's: an `<audio>` element asks again with
 * the same URL for every seek, so its ticket opens that one read-only path as often as asked until it expires.
 */
export interface Tickets {
  /**
   * `caller`: who asked (security.ts `callerOf`), so what the ticket opens counts against the same caller.
   * `origin`: the page that asked (a live call's start: its `Origin`), which alone may open it.
   */
  mint(path: string, caller?: string, origin?: string): TicketGrant;
  /**
   * When the ticket is genuine, for exactly `path`, unexpired and unused (it is used up then): the caller it
   * was made for; else false. `originAllowed`, when given, is asked with the origin the ticket was made for
   * before it is used up, and a no refuses the request (401): a ticket that leaked to another site's page is
   * refused there, and stays good for the page it was made for.
   */
  redeem(
    ticket: string,
    path: string,
    originAllowed?: (bound: string | undefined) => boolean,
  ): Promise<{ caller: string | undefined } | false>;
}

export interface TicketGrant {
  ticket: string;
  expiresAt: number;
}

/** Where used ticket ids are remembered; `markUsed` is false when the id was used before. */
export interface UsedTickets {
  markUsed(id: string): Promise<boolean>;
}

/** The query parameter a ticket travels in. */
export const TICKET_PARAM = 'ticket';

const VERSION = 'v1';
/** A ticket's claims: the path (`p`), the caller (`c`) and the origin (`o`) it was made for. */
const Claims = z.object({
  p: z.string(),
  c: z.string().max(80).optional(),
  o: z.string().max(2048).optional(),
});

/** The signing key, the same on every gateway with the same tokens (whatever their order). */
function keyOf(apiTokens: string[]): Buffer {
  if (apiTokens.length === 0) return randomBytes(32); // open API: tickets are never checked
  const ikm = [...new Set(apiTokens)].sort().join('\n');
  return Buffer.from(hkdfSync('sha256', ikm, 'vab-gateway', 'ticket-signing-v1', 32));
}

export function createTickets(opts: {
  apiTokens: string[];
  ttlMs: number;
  used: UsedTickets;
  now?: () => number;
}): Tickets {
  const tickets = createSignedTokens({
    key: keyOf(opts.apiTokens),
    version: VERSION,
    claims: Claims,
    maxLength: 4096,
    now: opts.now,
  });
  return {
    mint(path, caller, origin) {
      const { token, expiresAt } = tickets.mint({ p: path, c: caller, o: origin?.toLowerCase() }, opts.ttlMs);
      return { ticket: token, expiresAt };
    },
    async redeem(ticket, path, originAllowed) {
      const opened = tickets.open(ticket);
      if (!opened || opened.claims.p !== path) return false;
      const { c: caller, o: origin } = opened.claims;
      if (originAllowed && !originAllowed(origin))
        throw new AppError('UNAUTHORIZED', 'this socket may not be opened from this origin');
      // an <audio> element asks again as it seeks: its ticket opens that one path until it expires
      if (ticketReusable(path)) return { caller };
      return (await opts.used.markUsed(opened.nonce)) && { caller };
    },
  };
}

export const TICKETS_BUCKET = 'gateway-tickets';

/**
 * Used ticket ids in the JetStream KV bucket `gateway-tickets`, kept as long as a ticket lives (the bucket's
 * TTL), so the bucket never holds more than the last TTL's tickets. The bucket is made on first use; a
 * store that cannot be reached answers 503, never lets a ticket through twice.
 */
export function kvUsedTickets(nc: NatsConnection, ttlMs: number): UsedTickets {
  return {
    markUsed: kvUsedOnce(nc, {
      bucket: TICKETS_BUCKET,
      ttlMs,
      unavailable: 'the ticket store is unavailable',
    }),
  };
}

/**
 * The GET paths of this API that a browser opens without an `Authorization` header, the only ones a ticket
 * is made for (any other path of ours takes the bearer token: a ticket for `/metrics` or `/api/agents` would
 * only be a way to pass a credential in a URL). One entry per path; add one when a route needs it.
 */
export const TICKET_PATHS: readonly { pattern: string; opener: string; reusable?: true }[] = [
  { pattern: '/api/agents/:id/test-sessions/:sessionId/events', opener: 'an EventSource' },
  // a media element makes a Range request per seek, with the same URL: read-only, one path, until it expires
  {
    pattern: '/api/agents/:id/test-sessions/:sessionId/recording',
    opener: 'an <audio> element',
    reusable: true,
  },
  { pattern: '/api/agents/:id/voice-sessions/:sessionId/audio', opener: 'a WebSocket' },
  { pattern: '/api/agents/:id/calls/:callId/events', opener: 'an EventSource' },
  { pattern: '/api/agents/:id/calls/:callId/recording', opener: 'an <audio> element', reusable: true },
];

const ticketPatterns = TICKET_PATHS.map(
  ({ pattern }) =>
    new RegExp(
      `^${pattern
        .split('/')
        .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/')}$`,
    ),
);

/** This API's own paths: everything else is the upstream's (`UPSTREAM_URL`), whose sockets are not known here. */
const OWN_PATHS = ['/api', '/metrics', '/healthz', '/readyz', '/openapi.json', '/docs', '/console'];
const isOwn = (path: string) => OWN_PATHS.some((p) => path === p || path.startsWith(`${p}/`));

/** Whether a ticket for `path` opens it more than once (until it expires). */
function ticketReusable(path: string): boolean {
  return TICKET_PATHS.some((p, i) => p.reusable === true && ticketPatterns[i]!.test(path));
}

/** Whether a ticket may be made for `path`: a path of TICKET_PATHS, or with an upstream, a path of its. */
export function ticketAllowed(path: string, upstream: boolean): boolean {
  if (ticketPatterns.some((re) => re.test(path))) return true;
  return upstream && !isOwn(path);
}

export const CreateTicketBody = z
  .object({
    path: z
      .string()
      .min(1)
      .max(2000)
      .regex(/^\/[^?#\s]*$/, 'must be a request path starting with `/`, without a query or fragment')
      .describe('The exact path the ticket opens, e.g. `/api/agents/{id}/test-sessions/{sessionId}/events`'),
  })
  .strict();
export const TicketGrantSchema = z.object({
  ticket: z
    .string()
    .describe('Send it once as the `ticket` query parameter of a GET (or WebSocket) to `path`'),
  expiresAt: z.number().int().describe('Epoch ms after which it is refused'),
});

/** `POST /api/tickets`: the edge's own route (it reaches no service), documented like the route table's. */
export function registerTicketRoute(
  app: FastifyInstance,
  tickets: Tickets,
  opts: { upstream: boolean; callerOf: (req: FastifyRequest) => string },
): void {
  const error = (codes: string) => ({
    description: codes,
    content: { 'application/json': { schema: HttpErrorBody } },
  });
  app.route({
    method: 'POST',
    url: '/api/tickets',
    schema: {
      operationId: 'ticketsCreate',
      summary: 'A short-lived single-use ticket to open one path without a header (EventSource, WebSocket)',
      tags: ['tickets'],
      body: CreateTicketBody,
      response: {
        201: { description: 'Success', content: { 'application/json': { schema: TicketGrantSchema } } },
        400: error('`VALIDATION_FAILED`, `INVALID_JSON`'),
        401: error('`UNAUTHORIZED`'),
        413: error('`PAYLOAD_TOO_LARGE`'),
        415: error('`UNSUPPORTED_MEDIA_TYPE`'),
        429: error('`RATE_LIMITED`'),
        500: error('`INTERNAL`'),
      },
    },
    // as on every body of ours, a field it does not have is named (the schema would say "Unrecognized key")
    preValidation: async (req) => {
      const body = req.body;
      if (!body || typeof body !== 'object' || Array.isArray(body)) return;
      const unknown = Object.keys(body).filter((k) => k !== 'path');
      if (unknown.length > 0) {
        throw new AppError('VALIDATION_FAILED', `unknown field ${unknown.map((k) => `"${k}"`).join(', ')}`, {
          issues: unknown.map((k) => ({ path: `body.${k}`, message: `unknown field "${k}"` })),
        });
      }
    },
    handler: async (req, reply) => {
      const { path } = req.body as z.infer<typeof CreateTicketBody>;
      if (!ticketAllowed(path, opts.upstream)) {
        throw new AppError(
          'VALIDATION_FAILED',
          `no ticket is needed for ${path}: send the bearer token; tickets open only ${TICKET_PATHS.map((t) => t.pattern).join(', ')}${opts.upstream ? ' and the upstream’s paths' : ''}`,
          { issues: [{ path: 'body.path', message: 'not a path that takes a ticket' }] },
        );
      }
      return reply.code(201).send(tickets.mint(path, opts.callerOf(req)));
    },
  });
}
