import type { BusClient } from '@vab/bus';
import {
  AppError,
  LIVE_PREFIX,
  LiveCallParams,
  LiveCallStarted,
  LiveParams,
  agentOfResumeToken,
  PUBLIC_KEY_PREFIX,
  StartLiveCallBody,
  Subjects,
} from '@vab/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createHash } from 'node:crypto';
import { addressKey } from './address.js';
import { ticketOfRequest } from './security.js';
import { TICKET_PARAM, type Tickets } from './tickets.js';
import { resumeOf, type RelayVoice } from './voice-socket.js';

/**
 * A caller's address as the calls keep it and the per-address cap counts it (IPv4, IPv6 /64): hashed, never
 * the raw address. The same on every gateway (the cap is counted across them).
 */
const addressHashOf = (ip: string) =>
  createHash('sha256')
    .update(`vab-live-caller:${addressKey(ip)}`)
    .digest('base64url')
    .slice(0, 32);

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
 * The agent a call's socket is relayed to: the one its single-use ticket names; or, for a caller whose socket
 * dropped (its gateway died) and who reopens it with its resume token instead, the one the token names, which
 * the call's owner checks (signed by it, bound to this call, its latest alone).
 */
async function agentOfCallSocket(
  req: FastifyRequest,
  resume: string | undefined,
  tickets: Tickets,
): Promise<string> {
  if (resume !== undefined) return agentOfResumeToken(resume);
  const ticket = ticketOfRequest(req);
  const path = req.url.split('?')[0] ?? '';
  const redeemed = typeof ticket === 'string' ? await tickets.redeem(ticket, path) : false;
  if (!redeemed || redeemed.caller === undefined)
    throw new AppError(
      'UNAUTHORIZED',
      'open the call with the audioPath its start answered (a single-use ticket)',
    );
  return redeemed.caller;
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
    config: { LIVE_DOMAIN?: string | undefined; REQUEST_TIMEOUT_MS: number };
  },
): void {
  const timeoutMs = deps.config.REQUEST_TIMEOUT_MS;
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
      const auth = req.headers.authorization;
      const key = auth?.startsWith('Bearer ') ? auth.slice(7).trim() : undefined;
      let keyId: string | undefined;
      if (key !== undefined) {
        if (!key.startsWith(PUBLIC_KEY_PREFIX))
          throw new AppError(
            'UNAUTHORIZED',
            'a live call takes a publishable key (pk_…), or none from its page',
          );
        const verified = await bus.request(
          Subjects.publicKeysVerify,
          { key, subdomain, ...(req.headers.origin ? { origin: req.headers.origin } : {}) },
          { timeoutMs, requestId },
        );
        keyId = verified.keyId;
      } else if (!ownOrigin(req, subdomain, deps.config.LIVE_DOMAIN)) {
        throw new AppError('UNAUTHORIZED', 'a call from another site needs a publishable key of this agent');
      }
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
      // the ticket names the call's agent (its `caller` field): the socket is relayed to it alone
      const { ticket } = deps.tickets.mint(path, started.agentId);
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
      const { callId } = req.params as LiveCallParams;
      const resume = resumeOf(req);
      const agentId = await agentOfCallSocket(req, resume, deps.tickets);
      const { bus } = deps;
      deps.relay(req, reply, {
        agentId,
        sessionId: callId,
        resume,
        // the socket went: the caller hung up (the agent's own ends were told by the playground first)
        end: (_reason, requestId) =>
          bus
            ? bus.request(
                Subjects.callsHangUp,
                { agentId, callId, reason: 'caller_hung_up' },
                { timeoutMs: 10_000, requestId },
              )
            : Promise.resolve(),
      });
    },
  );
}
