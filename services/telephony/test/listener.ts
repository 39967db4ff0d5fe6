import type { FastifyInstance } from 'fastify';
import { createLogger } from '@vab/service-kit';
import { buildTelephonyHttp, type TelephonyHttpDeps } from '../src/http/server.js';

/** The operator's Twilio auth token in these tests (what signatures are made with). */
export const AUTH_TOKEN = 'twilio-auth-token-0123456789';

/** The listener alone: nothing behind it is reached by these requests. */
export async function listener(
  rate: TelephonyHttpDeps['rate'] = { perAddress: 1000, total: 1000 },
  trustProxy?: string[],
  maxConnectionsPerAddress = 1000,
): Promise<{ app: FastifyInstance; port: number }> {
  const app = await buildTelephonyHttp({
    nc: {} as never,
    bus: {} as never,
    numbers: {} as never,
    tokens: {} as never,
    calls: {} as never,
    twilio: {} as never,
    log: createLogger('telephony-test', 'silent'),
    authToken: AUTH_TOKEN,
    publicUrl: undefined,
    relay: { burstMs: 2000, startTimeoutMs: 10_000, attachTimeoutMs: 5000, liveProbeMs: 1000 },
    rate,
    trustProxy,
    maxConnectionsPerAddress,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { app, port: address.port };
}
