import type { FastifyInstance } from 'fastify';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '@vab/service-kit';
import { buildTelephonyHttp, MEDIA_PATH, type TelephonyHttpDeps } from './server.js';

/** The listener alone: nothing behind it is reached by a refused upgrade. */
async function listener(rate: TelephonyHttpDeps['rate']): Promise<{ app: FastifyInstance; port: number }> {
  const app = await buildTelephonyHttp({
    nc: {} as never,
    bus: {} as never,
    numbers: {} as never,
    tokens: {} as never,
    calls: {} as never,
    twilio: {} as never,
    log: createLogger('telephony-test', 'silent'),
    authToken: 'twilio-auth-token-0123456789',
    publicUrl: undefined,
    relay: { burstMs: 2000, startTimeoutMs: 10_000, attachTimeoutMs: 5000, liveProbeMs: 1000 },
    rate,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { app, port: address.port };
}

/** One upgrade of the media path, unsigned (or with a signature that does not match): its status line and headers. */
function upgrade(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () =>
      socket.write(
        `GET ${MEDIA_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
          'X-Twilio-Signature: bm90LWEtc2lnbmF0dXJl\r\n\r\n',
      ),
    );
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe("the media socket's upgrades", () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('count against the per-address limit as the webhooks do: past it 429 with Retry-After', async () => {
    const started = await listener({ perAddress: 2, total: 1000 });
    app = started.app;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await upgrade(started.port));
    expect(answers[0]).toMatch(/^HTTP\/1\.1 403 /);
    expect(answers[1]).toMatch(/^HTTP\/1\.1 403 /);
    expect(answers[2]).toMatch(/^HTTP\/1\.1 429 /);
    expect(answers[2]).toMatch(/\r\nretry-after: \d+\r\n/i);
  });

  it('count against the total limit too', async () => {
    const started = await listener({ perAddress: 1000, total: 2 });
    app = started.app;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await upgrade(started.port));
    expect(answers[2]).toMatch(/^HTTP\/1\.1 429 /);
  });
});
