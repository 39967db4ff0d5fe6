import type { FastifyInstance } from 'fastify';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { twilioSignature } from '../twilio/signature.js';
import { AUTH_TOKEN, listener } from '../../test/listener.js';
import { MEDIA_PATH, STATUS_PATH } from './server.js';

/**
 * One upgrade of the media path, signed as Twilio signs it (the URL alone) or with a signature that does not
 * match: its status line and headers (a socket that upgraded is closed by us once they came).
 */
function upgrade(port: number, signed = false): Promise<string> {
  const signature = signed
    ? twilioSignature(AUTH_TOKEN, `ws://127.0.0.1:${port}${MEDIA_PATH}`)
    : 'bm90LWEtc2lnbmF0dXJl';
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () =>
      socket.write(
        `GET ${MEDIA_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
          `X-Twilio-Signature: ${signature}\r\n\r\n`,
      ),
    );
    let answer = '';
    socket.on('data', (d: Buffer) => {
      answer += d.toString();
      if (answer.startsWith('HTTP/1.1 101 ') && answer.includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

/** A status callback (a call still ringing: nothing behind the listener is asked), signed or forged. */
async function statusCallback(port: number, signed: boolean, forwardedFor?: string): Promise<Response> {
  const form: [string, string][] = [
    ['CallSid', 'CA0123456789abcdef0123456789abcdef'],
    ['CallStatus', 'ringing'],
  ];
  const url = `http://127.0.0.1:${port}${STATUS_PATH}`;
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': signed ? twilioSignature(AUTH_TOKEN, url, form) : 'Zm9yZ2Vk',
      ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}),
    },
    body: new URLSearchParams(form).toString(),
  });
}

describe("the telephony listener's limits", () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it("count an address's forged upgrades as its forged webhooks: past the limit 429 with Retry-After", async () => {
    const started = await listener({ perAddress: 3, total: 1000 });
    app = started.app;
    expect((await statusCallback(started.port, false)).status).toBe(403);
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await upgrade(started.port));
    expect(answers[0]).toMatch(/^HTTP\/1\.1 403 /);
    expect(answers[1]).toMatch(/^HTTP\/1\.1 403 /);
    expect(answers[2]).toMatch(/^HTTP\/1\.1 429 /);
    expect(answers[2]).toMatch(/\r\nretry-after: \d+\r\n/i);
  });

  it("leave Twilio's own requests their budget when forged ones from the same address used theirs up", async () => {
    const started = await listener({ perAddress: 2, total: 1000 });
    app = started.app;
    const forged = [];
    for (let i = 0; i < 3; i++) forged.push((await statusCallback(started.port, false)).status);
    expect(forged).toEqual([403, 403, 429]);
    // behind a proxy every request comes from its address: a forger's flood refuses no real call
    expect((await statusCallback(started.port, true)).status).toBe(200);
    expect(await upgrade(started.port, true)).toMatch(/^HTTP\/1\.1 101 /);
  });

  it('count signed requests per address and in all, upgrades and webhooks each in a budget of their own', async () => {
    const started = await listener({ perAddress: 1000, total: 2 });
    app = started.app;
    // a media signature covers its URL alone: replayed past the upgrades' budget, it is refused…
    expect(await upgrade(started.port, true)).toMatch(/^HTTP\/1\.1 101 /);
    expect(await upgrade(started.port, true)).toMatch(/^HTTP\/1\.1 101 /);
    const over = await upgrade(started.port, true);
    expect(over).toMatch(/^HTTP\/1\.1 429 /);
    expect(over).toMatch(/\r\nretry-after: \d+\r\n/i);
    // …and the webhooks keep theirs: calls are still answered
    expect((await statusCallback(started.port, true)).status).toBe(200);
    expect((await statusCallback(started.port, true)).status).toBe(200);
    expect((await statusCallback(started.port, true)).status).toBe(429);
    // a forged request is not Twilio's: refused for its signature, from a budget of its own
    expect((await statusCallback(started.port, false)).status).toBe(403);

    const perAddress = await listener({ perAddress: 1, total: 1000 });
    await app.close();
    app = perAddress.app;
    expect((await statusCallback(perAddress.port, true)).status).toBe(200);
    expect((await statusCallback(perAddress.port, true)).status).toBe(429);
  });

  it('count the client a trusted proxy names (TRUST_PROXY), and only a trusted one', async () => {
    const trusting = await listener({ perAddress: 1, total: 1000 }, ['127.0.0.1']);
    app = trusting.app;
    expect((await statusCallback(trusting.port, false, '203.0.113.5')).status).toBe(403);
    expect((await statusCallback(trusting.port, false, '203.0.113.5')).status).toBe(429);
    // another client behind the same proxy has its own budget
    expect((await statusCallback(trusting.port, false, '203.0.113.6')).status).toBe(403);

    const notTrusting = await listener({ perAddress: 1, total: 1000 });
    await app.close();
    app = notTrusting.app;
    expect((await statusCallback(notTrusting.port, false, '203.0.113.5')).status).toBe(403);
    // a header anyone can send names no one: the peer is the client
    expect((await statusCallback(notTrusting.port, false, '203.0.113.6')).status).toBe(429);
  });

  it('hold at most MAX_CONNECTIONS_PER_ADDRESS connections from one address: one more is closed unread', async () => {
    const started = await listener({ perAddress: 1000, total: 1000 }, undefined, 2);
    app = started.app;
    const open = (): Promise<Socket> =>
      new Promise((resolve, reject) => {
        const socket = connect(started.port, '127.0.0.1', () => resolve(socket));
        socket.on('error', reject);
      });
    const held = [await open(), await open()];
    const third = await open();
    const closedUnread = await new Promise<boolean>((resolve) => {
      third.on('close', () => resolve(true));
      third.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      third.on('data', () => resolve(false));
    });
    expect(closedUnread).toBe(true);
    // one of the two let go: a connection is taken again
    held[0]!.destroy();
    await new Promise((r) => held[0]!.once('close', r));
    await expect
      .poll(async () => (await fetch(`http://127.0.0.1:${started.port}/healthz`)).status, { timeout: 10_000 })
      .toBe(200);
    held[1]!.destroy();
  });

  it("leave a trusted proxy uncapped: its connections are its clients' (every call's stream comes through it)", async () => {
    const started = await listener({ perAddress: 1000, total: 1000 }, ['127.0.0.1'], 2);
    app = started.app;
    const held = await Promise.all(
      [1, 2, 3].map(
        () =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(started.port, '127.0.0.1', () => resolve(socket));
            socket.on('error', reject);
          }),
      ),
    );
    const third = held[2]!;
    const answer = await new Promise<string>((resolve) => {
      let got = '';
      // a capped connection is closed as it is accepted: it answers nothing
      third.on('close', () => resolve(got));
      third.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.includes('\r\n\r\n')) resolve(got);
      });
      if (third.destroyed) resolve(got);
      else third.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    // held connections would keep the listener's close (afterEach) waiting, a failed check's included
    held.forEach((socket) => socket.destroy());
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
  });
});
