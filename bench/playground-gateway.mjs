// Shared by the playground benchmarks (playground-memory.mjs, playground-scale.mjs): the real gateway in this
// process on `connectNats` (production's transport, write coalescing included), without rate limits (hundreds
// of session starts from one address are the point, not abuse), and the body of a session start against the
// LiveKit RoomService fake.
import { connectNats } from '@vab/bus';
import { buildGateway } from '@vab/gateway';
import { fullFlow } from '@vab/testkit';

/** Resolves to `{ base, close }`: the gateway's URL, and a function that closes it and its connection. */
export async function startGateway({ natsUrl, log, requestTimeoutMs }) {
  const nc = await connectNats({ url: natsUrl, name: 'gateway', service: 'gateway' }, log);
  const app = await buildGateway({
    nc,
    log,
    config: {
      BODY_LIMIT_BYTES: 1 << 20,
      REQUEST_TIMEOUT_MS: requestTimeoutMs,
      READY_TIMEOUT_MS: 1000,
      security: { rateLimitMax: 1e9, sessionRateLimitMax: 1e9 },
    },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    base: `http://127.0.0.1:${app.server.address().port}`,
    close: async () => {
      await app.close();
      await nc.close();
    },
  };
}

/** `POST /api/agent-session` body: the full test flow, the fake's LiveKit credentials, placeholder keys. */
export const sessionStartBody = (fake) =>
  JSON.stringify({
    ...fullFlow(),
    livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
    apiKeys: { openai: 'k', elevenlabs: 'k', deepgram: 'k' },
  });
