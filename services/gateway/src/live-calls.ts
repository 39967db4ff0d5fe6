import type { BusClient } from '@vab/bus';
import {
  AppError,
  LIVE_PREFIX,
  LiveCallParams,
  LiveCallStarted,
  LiveParams,
  agentOfResumeToken,
  PUBLIC_CALL_EVENT_TYPES,
  PUBLIC_KEY_PREFIX,
  StartLiveCallBody,
  Subjects,
} from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createHmac, randomBytes } from 'node:crypto';
import { addressKey } from '@vab/service-kit';
import { bearer, ticketOfRequest, windowText } from './security.js';
import { TICKET_PARAM, type Tickets } from './tickets.js';
import { resumeOf, type RelayTarget, type RelayVoice } from './voice-socket.js';

/**
 * A caller's address as the calls keep it and the per-address cap counts it (IPv4, IPv6 /64): an HMAC keyed
 * with the operator's CALLER_HASH_KEY, never the raw address, nor a bare hash of it (the IPv4 space is small
 * enough to hash whole: a bare sha256 would give every address back). The same on every gateway that shares
 * the key (the cap is counted across them).
 */
function addressHasher(app: FastifyInstance, configured: string | undefined): (ip: string) => string {
  if (!configured)
    app.log.warn(
      { code: 'CALLER_HASH_KEY_UNSET' },
      "CALLER_HASH_KEY is not set: callers' address hashes change at every restart and differ between gateways",
    );
  const key = configured ?? randomBytes(32).toString('hex');
  return (ip) => createHmac('sha256', key).update(addressKey(ip)).digest('base64url').slice(0, 32);
}

/** Whether a key-less call comes from our own page: no Origin (not a browser's cross-origin call), ours, or the live domain's. */
function ownOrigin(req: FastifyRequest, subdomain: string, liveDomain: string | undefined): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return false;
  }
  return host === req.headers.host || (liveDomain !== undefined && host === `${subdomain}.${liveDomain}`);
}

/**
 * Who starts a call: the publishable key it carries (verified for the agent and the request's `Origin`, and
 * counted per key: LIVE_KEY_RATE_LIMIT_MAX per RATE_LIMIT_WINDOW_MS, in the rate limits' store, shared across
 * gateways with Redis, so a key copied off a site starts no more calls from many addresses), or none from our
 * own page. Resolves to the key's id (undefined: key-less).
 */
function keyGate(
  app: FastifyInstance,
  config: {
    LIVE_DOMAIN?: string | undefined;
    LIVE_KEY_RATE_LIMIT_MAX?: number;
    RATE_LIMIT_WINDOW_MS?: number;
  },
) {
  const windowMs = config.RATE_LIMIT_WINDOW_MS ?? 60_000;
  const max = config.LIVE_KEY_RATE_LIMIT_MAX ?? 60;
  const keyIdOf = new WeakMap<FastifyRequest, string>();
  const perKey = app.createRateLimit({
    max,
    timeWindow: windowMs,
    keyGenerator: (req) => `pk:${keyIdOf.get(req) ?? ''}`,
  });
  return async (
    req: FastifyRequest,
    subdomain: string,
    verify: (key: string, origin: string | undefined) => Promise<{ keyId: string }>,
  ): Promise<string | undefined> => {
    const key = bearer(req);
    if (key === undefined) {
      if (!ownOrigin(req, subdomain, config.LIVE_DOMAIN))
        throw new AppError('UNAUTHORIZED', 'a call from another site needs a publishable key of this agent');
      return undefined;
    }
    if (!key.startsWith(PUBLIC_KEY_PREFIX))
      throw new AppError('UNAUTHORIZED', 'a live call takes a publishable key (pk_…), or none from its page');
    const { keyId } = await verify(key, req.headers.origin);
    keyIdOf.set(req, keyId);
    const counted = await perKey(req);
    if (!counted.isAllowed && counted.isExceeded) {
      const seconds = Math.max(1, Math.ceil(counted.ttl / 1000));
      throw new AppError(
        'RATE_LIMITED',
        `too many calls with this publishable key: at most ${max} per ${windowText(windowMs)}; retry in ${seconds} seconds`,
        { retryAfterSeconds: seconds },
      );
    }
    return keyId;
  };
}

/**
 * The agent a call's socket is relayed to: the one its single-use ticket names; or, for a caller whose socket
 * dropped (its gateway died) and who reopens it with its resume token instead, the one the token names, which
 * the call's owner checks (signed by it, bound to this call, its latest alone).
 */
async function agentOfCallSocket(
  req: FastifyRequest,
  resume: string | undefined,
  tickets: Tickets,
  originAllowed: (bound: string | undefined) => boolean,
): Promise<string> {
  if (resume !== undefined) return agentOfResumeToken(resume);
  const ticket = ticketOfRequest(req);
  const path = req.url.split('?')[0] ?? '';
  const redeemed = typeof ticket === 'string' ? await tickets.redeem(ticket, path, originAllowed) : false;
  if (!redeemed || redeemed.caller === undefined)
    throw new AppError(
      'UNAUTHORIZED',
      'open the call with the audioPath its start answered (a single-use ticket)',
    );
  return redeemed.caller;
}

/**
 * How a call's socket ends it: the socket went, so the caller hung up (the agent's own ends were told by the
 * playground first), with why the gateway closed it when it did for what the caller sent.
 */
function hangUp(bus: BusClient | undefined, agentId: string, callId: string): RelayTarget['end'] {
  return (_reason, requestId, refusal) =>
    bus
      ? bus.request(
          Subjects.callsHangUp,
          {
            agentId,
            callId,
            reason: 'caller_hung_up',
            ...(refusal ? { detail: { kind: refusal } } : {}),
          },
          { timeoutMs: 10_000, requestId },
        )
      : Promise.resolve();
}

/**
 * `POST /live/:subdomain/calls` (no builder token: our page, or a publishable key from its allowed origins)
 * starts a call of the live deploy on a playground instance, and `…/calls/:callId/audio?ticket=` is its voice
 * socket, relayed exactly as a voice session's. The ticket (single use, short-lived) is the only way in, and
 * names the call's agent.
 */
export function registerLiveCalls(
  app: FastifyInstance,
  deps: {
    bus: BusClient | undefined;
    tickets: Tickets;
    relay: RelayVoice;
    config: {
      LIVE_DOMAIN?: string | undefined;
      REQUEST_TIMEOUT_MS: number;
      CALLER_HASH_KEY?: string | undefined;
      LIVE_KEY_RATE_LIMIT_MAX?: number | undefined;
      RATE_LIMIT_WINDOW_MS?: number | undefined;
    };
  },
): void {
  const timeoutMs = deps.config.REQUEST_TIMEOUT_MS;
  const addressHashOf = addressHasher(app, deps.config.CALLER_HASH_KEY);
  const keyOf = keyGate(app, deps.config);
  app.post(
    `${LIVE_PREFIX}/:subdomain/calls`,
    { schema: { hide: true, params: LiveParams } },
    async (req, reply) => {
      const { bus } = deps;
      if (!bus) throw new AppError('SERVICE_UNAVAILABLE', 'this gateway has no bus');
      const { subdomain } = req.params as LiveParams;
      const body = StartLiveCallBody.safeParse(req.body ?? {});
      if (!body.success) {
        throw new AppError('VALIDATION_FAILED', 'the body is not a call start', {
          issues: body.error.issues.map((i) => ({ path: ['body', ...i.path].join('.'), message: i.message })),
        });
      }
      const requestId = String(req.id);
      const keyId = await keyOf(req, subdomain, (key, origin) =>
        bus.request(
          Subjects.publicKeysVerify,
          { key, subdomain, ...(origin ? { origin } : {}) },
          { timeoutMs, requestId },
        ),
      );
      const hash = addressHashOf(req.ip);
      const started = await bus.request(
        Subjects.callsStart,
        {
          subdomain,
          channel: 'web',
          caller: { addressHash: hash },
          addressKey: hash,
          ...(keyId !== undefined ? { keyId } : {}),
          transport: 'socket',
          audio: body.data.audio,
        },
        { timeoutMs, requestId },
      );
      const path = `${LIVE_PREFIX}/${subdomain}/calls/${started.callId}/audio`;
      // the ticket names the call's agent (its `caller` field): the socket is relayed to it alone; and the
      // page that started the call (its Origin, checked above against the key's allowed origins): the
      // upgrade, which a browser sends with its page's Origin, must come from that same page
      const { ticket } = deps.tickets.mint(path, started.agentId, req.headers.origin);
      const answer: LiveCallStarted = {
        callId: started.callId,
        audioPath: `${path}?${TICKET_PARAM}=${encodeURIComponent(ticket)}`,
        audio: started.audio,
        connectWithinMs: started.connectWithinMs,
      };
      return reply.code(201).send(answer);
    },
  );

  app.get(
    `${LIVE_PREFIX}/:subdomain/calls/:callId/audio`,
    { schema: { hide: true, params: LiveCallParams } },
    async (req, reply) => {
      const { callId, subdomain } = req.params as LiveCallParams;
      const resume = resumeOf(req);
      const origin = req.headers.origin?.toLowerCase();
      // a call started from a page (with a publishable key, or ours) opens from that page alone; one started
      // with no Origin (no browser) opens from no other site's page than ours, as a key-less start would
      const agentId = await agentOfCallSocket(req, resume, deps.tickets, (bound) =>
        bound !== undefined ? origin === bound : ownOrigin(req, subdomain, deps.config.LIVE_DOMAIN),
      );
      const { bus } = deps;
      deps.relay(req, reply, {
        agentId,
        sessionId: callId,
        resume,
        end: hangUp(bus, agentId, callId),
        events: PUBLIC_CALL_EVENT_TYPES,
      });
    },
  );
}
