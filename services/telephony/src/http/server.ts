import rateLimit from '@fastify/rate-limit';
import type { NatsConnection } from '@nats-io/transport-node';
import { safeError, type BusClient, type Logger } from '@vab/bus';
import { addressKey, addressMatcher, capConnections } from '@vab/service-kit';
import { Subjects } from '@vab/contracts';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { ServerResponse, STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { answerCall, failedTwiml } from '../calls/answer.js';
import type { CallTokens } from '../calls/call-tokens.js';
import type { PhoneCalls } from '../calls/phone-calls.js';
import type { TwilioRest } from '../twilio/rest.js';
import { PhoneRelay, type PhoneRelaySettings } from '../calls/phone-relay.js';
import type { NumberStore } from '../numbers/store.js';
import { SIGNATURE_HEADER, validTwilioSignature } from '../twilio/signature.js';
import { EMPTY_TWIML } from '../twilio/twiml.js';
import { createHmac, hkdfSync } from 'node:crypto';

export const VOICE_PATH = '/telephony/twilio/voice';
export const STATUS_PATH = '/telephony/twilio/status';
export const MEDIA_PATH = '/telephony/twilio/media';

export interface TelephonyHttpDeps {
  nc: NatsConnection;
  bus: BusClient;
  numbers: NumberStore;
  tokens: CallTokens;
  calls: PhoneCalls;
  twilio: TwilioRest;
  log: Logger;
  authToken: string;
  /** The public base URL Twilio calls (`https://…`), or none: the request's Host (local development). */
  publicUrl: string | undefined;
  relay: PhoneRelaySettings;
  rate: { perAddress: number; total: number };
  /** The proxies whose X-Forwarded-For names the client the limits count (Fastify's `trustProxy`). */
  trustProxy?: string[] | undefined;
  /** Connections one address may hold open at once (0: no cap). */
  maxConnectionsPerAddress: number;
}

/** Twilio's form-encoded parameters, in order, as signed. */
type Form = [string, string][];

/**
 * A phone caller as a canary keeps it on one side (decision 0035): an HMAC of the full number, keyed from the
 * account's auth token (shared by every instance) through HKDF as the call tokens' key is — never the token
 * itself — so the number itself never leaves this service. A withheld number (Twilio's `anonymous`,
 * `restricted`, `+266696687`, none) names no one caller: no key, the call is drawn afresh.
 */
export function callerKeys(authToken: string): (number: string) => string | undefined {
  const key = Buffer.from(hkdfSync('sha256', authToken, 'vab-telephony', 'canary-caller-v1', 32));
  return (number) =>
    /^\+\d{7,15}$/.test(number) && number !== '+266696687'
      ? createHmac('sha256', key).update(number).digest('base64url').slice(0, 32)
      : undefined;
}

/** The URL Twilio called, as it signed it: the public base (or the Host) with the path and query. */
function calledUrl(
  req: { url?: string | undefined; headers: IncomingMessage['headers'] },
  base: string | undefined,
  scheme: 'http' | 'ws',
): string {
  const origin = base
    ? scheme === 'ws'
      ? base.replace(/^http/, 'ws')
      : base
    : `${scheme}://${req.headers.host ?? 'localhost'}`;
  return `${origin}${req.url ?? '/'}`;
}

/**
 * The telephony service's own HTTP listener (TELEPHONY_PORT): Twilio's voice and status webhooks and the
 * media WebSocket, every one signature-checked and rate limited per address. Not the builder API: the gateway
 * stays that edge, and `/api/phone-numbers` reaches this service over the bus.
 */
export async function buildTelephonyHttp(deps: TelephonyHttpDeps): Promise<FastifyInstance> {
  const callerKeyOf = callerKeys(deps.authToken);
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    bodyLimit: 64 * 1024,
    requestTimeout: 15_000,
    ...(deps.trustProxy !== undefined ? { trustProxy: deps.trustProxy } : {}),
    // the router's own refusals (a malformed URL, whose default answer echoes it) in the same plain text
    frameworkErrors: (_err, _req, reply: FastifyReply) =>
      void reply.code(400).type('text/plain').send(statusText(400)),
  });
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) =>
    done(null, [...new URLSearchParams(body as string)]),
  );
  // a trusted proxy's connections are its clients' (it caps them): every call's media stream comes through it
  capConnections(
    app.server,
    deps.maxConnectionsPerAddress,
    deps.trustProxy ? addressMatcher(deps.trustProxy) : undefined,
  );
  answerPlainly(app, deps.log);
  await app.register(rateLimit, { global: false });
  const limits = requestLimits(app, deps.rate);
  app.get('/healthz', async () => ({ status: 'ok' }));

  /** The form of a signed webhook, or a 403 sent (nothing started). */
  const signedForm = (req: FastifyRequest): Form | undefined => {
    const form = Array.isArray(req.body) ? (req.body as Form) : [];
    const signature = req.headers[SIGNATURE_HEADER];
    const url = calledUrl(req.raw, deps.publicUrl, 'http');
    return validTwilioSignature(
      deps.authToken,
      typeof signature === 'string' ? signature : undefined,
      url,
      form,
    )
      ? form
      : undefined;
  };

  app.post(VOICE_PATH, async (req, reply) => {
    const form = signedForm(req);
    if (await limits.refused(req, reply, 'webhook', form !== undefined)) return reply;
    if (!form) return reply.code(403).type('text/plain').send('signature check failed');
    const params = new Map(form);
    const call = {
      callSid: params.get('CallSid') ?? '',
      to: params.get('To') ?? '',
      from: params.get('From') ?? '',
    };
    reply.type('text/xml');
    try {
      const answer = await answerCall(call, {
        numbers: deps.numbers,
        bus: deps.bus,
        tokens: deps.tokens,
        calls: deps.calls,
        log: deps.log,
        streamUrl: calledUrl({ url: MEDIA_PATH, headers: req.headers }, deps.publicUrl, 'ws'),
        requestId: String(req.id),
        callerKeyOf,
      });
      if (answer.refused)
        deps.log.info({ callSid: call.callSid, refused: answer.refused }, 'phone call refused');
      return answer.twiml;
    } catch (err) {
      deps.log.error(
        { code: 'PHONE_ANSWER_FAILED', callSid: call.callSid, err: safeError(err) },
        'phone call not answered',
      );
      return failedTwiml();
    }
  });

  app.post(STATUS_PATH, async (req, reply) => {
    const form = signedForm(req);
    if (await limits.refused(req, reply, 'webhook', form !== undefined)) return reply;
    if (!form) return reply.code(403).type('text/plain').send('signature check failed');
    const p = new Map(form);
    const callSid = p.get('CallSid') ?? '';
    const callStatus = p.get('CallStatus') ?? '';
    deps.log.info({ callSid, callStatus, callDuration: p.get('CallDuration') }, 'phone call status');
    try {
      await recordStatus(deps, callSid, callStatus, String(req.id));
    } catch (err) {
      // Twilio retries nothing on an error of ours: logged, and the call ends by its own bounds
      deps.log.error(
        { code: 'PHONE_STATUS_FAILED', callSid, err: safeError(err) },
        'phone call status not recorded',
      );
    }
    return reply.type('text/xml').send(EMPTY_TWIML);
  });

  registerMediaSocket(app, deps, limits);
  return app;
}

/** Twilio's final call statuses: the call is over on Twilio's side. */
const FINAL_STATUSES = new Set(['completed', 'busy', 'failed', 'no-answer', 'canceled']);

/**
 * What a status callback changes: a call Twilio reports over ends now (the first end stands, so a call its
 * stream or flow ended already keeps its reason): `no_connect` when its media stream never attached (the caller
 * hung up before the stream connected, or Twilio could not open it), else `caller_hung_up` (the stream's end may
 * not have reached us). Without this a call that never connected would wait out VOICE_CONNECT_TIMEOUT_MS.
 */
async function recordStatus(
  deps: TelephonyHttpDeps,
  callSid: string,
  callStatus: string,
  requestId: string,
): Promise<void> {
  if (!FINAL_STATUSES.has(callStatus)) return;
  const call = await deps.calls.get(callSid);
  if (!call) return;
  await deps.bus.request(
    Subjects.callsHangUp,
    { agentId: call.agentId, callId: call.callId, reason: call.attached ? 'caller_hung_up' : 'no_connect' },
    { timeoutMs: 10_000, requestId },
  );
}

/**
 * Every answer here is read by Twilio (by its status) or by a prober: short plain text, as this listener's
 * refusals are, never Fastify's default JSON (an unexpected error's own message in it).
 */
function answerPlainly(app: FastifyInstance, log: Logger): void {
  app.setNotFoundHandler((_req, reply) => reply.code(404).type('text/plain').send('not found'));
  app.setErrorHandler((err: FastifyError, req, reply) => {
    const status =
      err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) log.error({ code: 'PHONE_REQUEST_FAILED', err: safeError(err) }, 'request failed');
    else req.log.info({ code: err.code, status }, 'request rejected');
    return reply.code(status).type('text/plain').send(statusText(status));
  });
}

const statusText = (status: number) => (STATUS_CODES[status] ?? 'error').toLowerCase();

/** What a request is to the limits: a webhook (voice, status) or a media socket's upgrade. */
type LimitedKind = 'webhook' | 'media';

interface RequestLimits {
  /** Counts a request whose signature is known; true when it is over a limit (a 429 was sent). */
  refused(req: FastifyRequest, reply: FastifyReply, kind: LimitedKind, signed: boolean): Promise<boolean>;
}

/**
 * Requests a minute, counted once the signature is checked, in budgets of their own: one address's signed
 * webhooks, all signed webhooks, and the same two for the media socket's upgrades; one address's unsigned
 * requests. Forged requests use up no budget of Twilio's own, so a flood of them (from one proxy's address,
 * or from many) refuses no real call: counted before the check, it did. The media upgrade's signature covers
 * its URL alone, the same for every stream: one seen once can be replayed, and its replays use up the
 * upgrades' budgets, never the webhooks' (a call is still answered, with its TwiML). A forged request costs
 * its parse (at most the 64 KiB body limit) and one HMAC, under the listener's connection and time bounds.
 */
function requestLimits(app: FastifyInstance, rate: TelephonyHttpDeps['rate']): RequestLimits {
  const limit = (max: number, key: (req: FastifyRequest) => string) =>
    app.createRateLimit({ max, timeWindow: 60_000, keyGenerator: key });
  const signedChecks = (kind: LimitedKind) => [
    limit(rate.perAddress, (req) => `${kind}:${addressKey(req.ip)}`),
    limit(rate.total, () => kind),
  ];
  const checks = {
    webhook: signedChecks('webhook'),
    media: signedChecks('media'),
    unsigned: [limit(rate.perAddress, (req) => `unsigned:${addressKey(req.ip)}`)],
  };
  return {
    async refused(req, reply, kind, signed) {
      for (const check of checks[signed ? kind : 'unsigned']) {
        const counted = await check(req);
        if (counted.isAllowed || !counted.isExceeded) continue;
        const seconds = Math.max(1, Math.ceil(counted.ttl / 1000));
        await reply
          .code(429)
          .header('retry-after', String(seconds))
          .type('text/plain')
          .send('too many requests');
        return true;
      }
      return false;
    },
  };
}

/** The bytes that came after an upgrade request's headers (kept by the upgrade listener for `ws`). */
const kHead = Symbol('media-upgrade-head');
type UpgradeRequest = IncomingMessage & { [kHead]?: Buffer };
const ignoreSocketError = () => undefined;

/**
 * The media WebSocket: its upgrade signed over the Stream URL exactly as the TwiML gave it. Upgrades reach the
 * router as requests (as the gateway's do), under the listener's connection, time and size bounds, and the
 * route counts them in the upgrades' budgets (`requestLimits`): a signature seen once (it covers the URL alone,
 * the same for every stream) opens no more sockets than those allow.
 */
function registerMediaSocket(app: FastifyInstance, deps: TelephonyHttpDeps, limits: RequestLimits): void {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 128 * 1024 });
  let seq = 0;
  // Node takes its error listener off a socket it hands to an 'upgrade' listener: a client that resets it
  // while the hooks run would be an unhandled 'error'; a socket's error destroys it already
  app.server.on('connection', (socket: Socket) => socket.on('error', ignoreSocketError));
  app.server.on('upgrade', (req: UpgradeRequest, socket: Duplex, head: Buffer) => {
    socket.once('end', () => socket.destroy());
    try {
      req[kHead] = head;
      const response = new ServerResponse(req);
      response.assignSocket(socket as Socket);
      // an upgrade refused with an HTTP answer (403, 404, 429) is ended with it
      response.on('finish', () => socket.destroy());
      app.routing(req, response);
    } catch (err) {
      deps.log.error({ code: 'PHONE_RELAY_FAILED', err: safeError(err) }, 'media upgrade failed');
      socket.destroy();
    }
  });
  app.get(MEDIA_PATH, async (req, reply) => {
    if (req.headers.upgrade?.toLowerCase() !== 'websocket')
      return reply.code(426).header('upgrade', 'websocket').type('text/plain').send('a WebSocket');
    const signature = req.headers[SIGNATURE_HEADER];
    const url = calledUrl(req.raw, deps.publicUrl, 'ws');
    const signed = validTwilioSignature(
      deps.authToken,
      typeof signature === 'string' ? signature : undefined,
      url,
    );
    if (await limits.refused(req, reply, 'media', signed)) return reply;
    if (!signed) return reply.code(403).type('text/plain').send('signature check failed');
    reply.hijack();
    const raw = req.raw as UpgradeRequest;
    try {
      wss.handleUpgrade(raw, raw.socket, raw[kHead] ?? Buffer.alloc(0), (ws) => {
        new PhoneRelay({
          nc: deps.nc,
          bus: deps.bus,
          tokens: deps.tokens,
          calls: deps.calls,
          twilio: deps.twilio,
          log: deps.log,
          socket: ws,
          settings: deps.relay,
          requestId: `media-${++seq}`,
        }).open();
      });
    } catch (err) {
      deps.log.error({ code: 'PHONE_RELAY_FAILED', err: safeError(err) }, 'media upgrade failed');
      raw.socket.destroy();
    }
  });
}
