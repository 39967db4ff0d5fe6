import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamError, JetStreamApiCodes, JetStreamApiError, Kvm, type KV } from '@vab/bus';
import { AppError, HttpErrorBody } from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
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
const Payload = z.object({
  p: z.string(),
  e: z.number().int(),
  n: z.string().regex(/^[A-Za-z0-9_-]{16,64}$/),
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
  const key = keyOf(opts.apiTokens);
  const now = opts.now ?? Date.now;
  const sign = (body: string) => createHmac('sha256', key).update(`${VERSION}.${body}`).digest();
  return {
    mint(path, caller, origin) {
      const expiresAt = now() + opts.ttlMs;
      const body = Buffer.from(
        JSON.stringify({
          p: path,
          e: expiresAt,
          n: randomBytes(18).toString('base64url'),
          c: caller,
          o: origin?.toLowerCase(),
        }),
      ).toString('base64url');
      return { ticket: `${VERSION}.${body}.${sign(body).toString('base64url')}`, expiresAt };
    },
    async redeem(ticket, path, originAllowed) {
      const [version, body, mac] = ticket.split('.');
      if (version !== VERSION || !body || !mac || ticket.length > 4096) return false;
      const expected = sign(body);
      const presented = Buffer.from(mac, 'base64url');
      if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return false;
      let payload: z.infer<typeof Payload>;
      try {
        payload = Payload.parse(JSON.parse(Buffer.from(body, 'base64url').toString('utf8')));
      } catch {
        return false;
      }
      if (payload.p !== path || payload.e <= now()) return false;
      if (originAllowed && !originAllowed(payload.o))
        throw new AppError('UNAUTHORIZED', 'this socket may not be opened from this origin');
      // an <audio> element asks again as it seeks: its ticket opens that one path until it expires
      if (ticketReusable(path)) return { caller: payload.c };
      return (await opts.used.markUsed(payload.n)) && { caller: payload.c };
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
  let bucket: Promise<KV> | undefined;
  const open = (): Promise<KV> =>
    (bucket ??= (async () => {
      const kvm = new Kvm(nc);
      // a margin over the lifetime: a ticket is remembered until well after it stops being accepted
      const options = { history: 1, ttl: ttlMs + 10_000 };
      try {
        return await kvm.create(TICKETS_BUCKET, options);
      } catch (err) {
        // another gateway made it with another TTL: use it as it is (docs/operations.md says to share it)
        if (err instanceof JetStreamApiError) return kvm.open(TICKETS_BUCKET);
        throw err;
      }
    })().catch((err: unknown) => {
      bucket = undefined;
      throw err;
    }));
  const empty = new Uint8Array(0);
  return {
    async markUsed(id) {
      try {
        const kv = await open();
        await kv.create(id, empty);
        return true;
      } catch (err) {
        if (
          isJetStreamError(
            err,
            JetStreamApiCodes.StreamWrongLastSequence,
            JetStreamApiCodes.StreamWrongLastSequenceUnknown,
          )
        ) {
          return false;
        }
        const unavailable = new AppError('SERVICE_UNAVAILABLE', 'the ticket store is unavailable');
        throw Object.assign(unavailable, { cause: err });
      }
    },
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
