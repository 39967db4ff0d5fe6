import { configOrExit, runProcess } from '@vab/service-kit';
import { redisTargetOf } from '@vab/storage';
import { loadConfig } from './config.js';
import { startTelephonyService } from './service.js';

const config = configOrExit('telephony', () => loadConfig(process.env));
runProcess({
  service: 'telephony',
  config,
  redis: redisTargetOf(config),
  start: async ({ nc, redis, log }) => {
    if (!redis) throw new Error('no Redis connection'); // given above: never
    const service = await startTelephonyService({
      nc,
      redis,
      log,
      settings: {
        authToken: config.TWILIO_AUTH_TOKEN,
        publicUrl: config.PUBLIC_URL,
        callTokenTtlMs: config.CALL_TOKEN_TTL_MS,
        twilio: {
          accountSid: config.TWILIO_ACCOUNT_SID,
          apiBaseUrl: config.TWILIO_API_BASE_URL,
          egressAllow: config.TWILIO_EGRESS_ALLOW,
        },
        relay: { burstMs: config.MEDIA_BURST_MS },
        rate: { perAddress: config.WEBHOOK_RATE_PER_ADDRESS, total: config.WEBHOOK_RATE_TOTAL },
        trustProxy: config.TRUST_PROXY,
        maxConnectionsPerAddress: config.MAX_CONNECTIONS_PER_ADDRESS,
        host: config.TELEPHONY_HOST,
        port: config.TELEPHONY_PORT,
      },
    });
    return { ready: service.ready, closed: service.closed, stop: (boundMs) => service.stop(boundMs) };
  },
});
