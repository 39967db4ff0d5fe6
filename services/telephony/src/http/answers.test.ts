import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listener } from '../../test/listener.js';
import { STATUS_PATH, VOICE_PATH } from './server.js';

/**
 * What the listener answers besides its webhooks and media socket: plain text naming the status, as its own
 * refusals, never Fastify's default JSON (whose `message` would carry a parser's or an error's own words).
 */
let app: FastifyInstance;
let base: string;

beforeAll(async () => {
  const started = await listener();
  app = started.app;
  base = `http://127.0.0.1:${started.port}`;
});
afterAll(() => app.close());

async function answer(path: string, init?: RequestInit) {
  const res = await fetch(`${base}${path}`, init);
  return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
}

describe("the telephony listener's other answers", () => {
  it('a path it does not serve: 404 in plain text', async () => {
    expect(await answer('/telephony/twilio/nope')).toEqual({
      status: 404,
      type: 'text/plain',
      body: 'not found',
    });
  });

  it('a URL the router cannot read: 400 in plain text, not echoed', async () => {
    expect(await answer('/telephony/twilio/%E0%A4%A')).toEqual({
      status: 400,
      type: 'text/plain',
      body: 'bad request',
    });
  });

  it('a body past its 64 KiB: 413 in plain text', async () => {
    const res = await answer(VOICE_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `Digits=${'1'.repeat(70 * 1024)}`,
    });
    expect(res).toEqual({ status: 413, type: 'text/plain', body: 'payload too large' });
  });

  it("a body its parser refuses: the status in plain text, not the parser's words", async () => {
    const res = await answer(STATUS_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"CallSid": ',
    });
    expect(res.status).toBe(400);
    expect(res).toMatchObject({ type: 'text/plain', body: 'bad request' });
  });
});
