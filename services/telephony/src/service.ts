import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, serve, type BusClient, type HandlerTable, type Logger, type Served } from '@vab/bus';
import { DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, idempotency, RedisIdempotencyStore } from '@vab/service-kit';
import type { RedisClient } from '@vab/storage';
import { createEgressFetch, EgressPolicy, type AllowEntry } from '@vab/egress';
import type { FastifyInstance } from 'fastify';
import { createCallTokens, kvUsedNonces, type CallTokens } from './calls/call-tokens.js';
import { PhoneCalls } from './calls/phone-calls.js';
import { TwilioRest } from './twilio/rest.js';
import { DEFAULT_PHONE_RELAY, type PhoneRelaySettings } from './calls/phone-relay.js';
import { phoneNumbersCreate } from './handlers/phone-numbers-create.js';
import { phoneNumbersDelete } from './handlers/phone-numbers-delete.js';
import { phoneNumbersList } from './handlers/phone-numbers-list.js';
import { phoneNumbersUpdate } from './handlers/phone-numbers-update.js';
import { telephonyHealth } from './handlers/telephony-health.js';
import { buildTelephonyHttp } from './http/server.js';
import { NumberStore } from './numbers/store.js';

export function telephonyHandlers(
  store: NumberStore,
  redis: RedisClient,
  bus: BusClient,
): HandlerTable<'telephony'> {
  return {
    'telephony.numbers.create': phoneNumbersCreate(store, bus),
    'telephony.numbers.list': phoneNumbersList(store),
    'telephony.numbers.update': phoneNumbersUpdate(store, bus),
    'telephony.numbers.delete': phoneNumbersDelete(store),
    'telephony.health': telephonyHealth(redis),
  };
}

export interface TelephonySettings {
  authToken: string;
  /** Twilio's REST API, for a transfer to a number: the account (unset: none), its base URL, what it may reach. */
  twilio?: { accountSid: string | undefined; apiBaseUrl: string; egressAllow: AllowEntry[] };
  publicUrl: string | undefined;
  callTokenTtlMs: number;
  relay?: Partial<PhoneRelaySettings>;
  rate?: { perAddress: number; total: number };
  /** The proxies whose X-Forwarded-For names the client (TRUST_PROXY); none: the peer is. */
  trustProxy?: string[] | undefined;
  /** Connections one address may hold open at once (MAX_CONNECTIONS_PER_ADDRESS; 0: no cap). */
  maxConnectionsPerAddress?: number;
  /** Where the HTTP listener listens (port 0: one the system picks). */
  host: string;
  port: number;
}

export interface TelephonyService extends Served {
  http: FastifyInstance;
  /** The HTTP listener's base URL (`http://host:port`). */
  url: string;
  tokens: CallTokens;
}

/** Serves the phone-number subjects and Twilio's webhooks and media socket; `main.ts` owns the lifecycle. */
export async function startTelephonyService(deps: {
  nc: NatsConnection;
  redis: RedisClient;
  log: Logger;
  settings: TelephonySettings;
}): Promise<TelephonyService> {
  const { nc, redis, log, settings } = deps;
  const bus = busClientOf(nc);
  const numbers = new NumberStore(redis);
  const tokens = createCallTokens({
    authToken: settings.authToken,
    ttlMs: settings.callTokenTtlMs,
    markUsed: kvUsedNonces(nc, settings.callTokenTtlMs),
  });
  const served = serve(nc, {
    service: 'telephony',
    handlers: telephonyHandlers(numbers, redis, bus),
    log,
    idempotency: idempotency(new RedisIdempotencyStore(redis, 'tp:')),
  });
  const http = await buildTelephonyHttp({
    nc,
    bus,
    numbers,
    tokens,
    calls: new PhoneCalls(redis),
    twilio: twilioRest(settings, log),
    log,
    authToken: settings.authToken,
    publicUrl: settings.publicUrl,
    relay: { ...DEFAULT_PHONE_RELAY, ...settings.relay },
    rate: settings.rate ?? { perAddress: 300, total: 6000 },
    trustProxy: settings.trustProxy,
    maxConnectionsPerAddress: settings.maxConnectionsPerAddress ?? DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
  });
  const address = await http.listen({ host: settings.host, port: settings.port });
  log.info({ address }, 'telephony listening');
  return {
    ...served,
    http,
    url: address.replace('0.0.0.0', '127.0.0.1'),
    tokens,
    async stop(boundMs: number) {
      await Promise.all([served.stop(boundMs), http.close()]);
    },
  };
}

/** Bound on one REST call to Twilio (connect, headers, body pauses). */
const TWILIO_REST_TIMEOUT_MS = 10_000;

function twilioRest(settings: TelephonySettings, log: Logger): TwilioRest {
  const t = settings.twilio ?? {
    accountSid: undefined,
    apiBaseUrl: 'https://api.twilio.com',
    egressAllow: [],
  };
  const fetch = createEgressFetch({
    policy: new EgressPolicy(t.egressAllow),
    timeoutMs: TWILIO_REST_TIMEOUT_MS,
    maxResponseBytes: 64 * 1024,
    log,
    refusal: 'telephony',
  });
  return new TwilioRest(
    { accountSid: t.accountSid, authToken: settings.authToken, apiBaseUrl: t.apiBaseUrl },
    fetch,
    log,
  );
}
