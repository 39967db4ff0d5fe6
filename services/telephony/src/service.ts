import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, serve, type BusClient, type HandlerTable, type Logger, type Served } from '@vab/bus';
import { idempotency, RedisIdempotencyStore } from '@vab/service-kit';
import type { RedisClient } from '@vab/storage';
import type { FastifyInstance } from 'fastify';
import { createCallTokens, kvUsedNonces, type CallTokens } from './calls/call-tokens.js';
import { PhoneCalls } from './calls/phone-calls.js';
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
  publicUrl: string | undefined;
  callTokenTtlMs: number;
  relay?: Partial<PhoneRelaySettings>;
  rate?: { perAddress: number; total: number };
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
    log,
    authToken: settings.authToken,
    publicUrl: settings.publicUrl,
    relay: { ...DEFAULT_PHONE_RELAY, ...settings.relay },
    rate: settings.rate ?? { perAddress: 300, total: 6000 },
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
