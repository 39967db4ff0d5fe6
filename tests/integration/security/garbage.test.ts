import { startSpeechStub, VoiceClient, voiceFlow } from '@vab/testkit';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/**
 * A hostile client against a whole stack in this process: malformed upgrades and requests (spaces, wildcards,
 * dots, percent-encodings, huge ids, invalid UTF-8), bad WebSocket frames, sockets reset or half-closed at every
 * step. Nothing may end a process: every unhandled rejection or exception here would have ended the gateway's
 * (or the playground's); bad ids get a clear 400, never an answer that blames the instance (4503).
 */

const TOKEN = 'garbage-test-token-0123456789';
const KEY = 'sk-garbage-test-key-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };

let stack: Stack;
let http: ReturnType<typeof api>;
let chat: Awaited<ReturnType<typeof startOpenAiStub>>;
let speech: Awaited<ReturnType<typeof startSpeechStub>>;
let agentId: string;
const unhandled: unknown[] = [];
const collect = (err: unknown) => unhandled.push(err);

beforeAll(async () => {
  process.on('unhandledRejection', collect);
  process.on('uncaughtException', collect);
  chat = await startOpenAiStub(() => ({ content: 'ok' }));
  speech = await startSpeechStub({ transcribe: () => '' });
  stack = await startStack({ security: { apiTokens: [TOKEN] } });
  http = api(stack.baseUrl);
  const agent = await http.post(
    '/api/agents',
    { name: 'Target', flow: voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL }) },
    auth,
  );
  expect(agent.status).toBe(201);
  agentId = agent.body.id as string;
});
afterAll(async () => {
  process.off('unhandledRejection', collect);
  process.off('uncaughtException', collect);
  await stack?.close();
  await chat?.close();
  await speech?.close();
});

const wsUrl = (path: string) => stack.baseUrl.replace(/^http/, 'ws') + path;

async function startVoice(): Promise<{ sessionId: string; audioPath: string }> {
  const started = await http.post(
    `/api/agents/${agentId}/voice-sessions`,
    { apiKeys: { openai: KEY } },
    auth,
  );
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  return started.body as { sessionId: string; audioPath: string };
}

/** What an upgrade got: an HTTP answer instead of the socket, or the socket's close. */
function upgrade(path: string, headers: Record<string, string> = auth) {
  return new Promise<{
    status?: number;
    body?: string;
    close?: number;
    reason?: string;
    timedOut?: true;
  }>((resolve) => {
    const ws = new WebSocket(wsUrl(path), { headers });
    // a socket left open (attached where it should not be) fails the test rather than holding it
    const timer = setTimeout(() => {
      resolve({ timedOut: true });
      ws.terminate();
    }, 10_000);
    ws.on('close', () => clearTimeout(timer));
    ws.on('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, body }));
      req.on('error', () => undefined);
    });
    ws.on('close', (code, reason) => resolve({ close: code, reason: reason.toString() }));
    ws.on('error', () => undefined);
  });
}

/** Bytes written on a raw connection; resolves with what came back once the server closed it (or 5 s). */
function raw(chunks: (string | Buffer)[], then: 'wait' | 'end' | 'destroy' | 'reset' = 'wait') {
  return new Promise<string>((resolve) => {
    const url = new URL(stack.baseUrl);
    const socket: Socket = connect(Number(url.port), url.hostname);
    let answer = '';
    const timer = setTimeout(() => socket.destroy(), 5000);
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answer);
    });
    for (const c of chunks) socket.write(c);
    if (then === 'end') socket.end();
    else if (then === 'destroy') socket.destroy();
    else if (then === 'reset') socket.resetAndDestroy();
  });
}

const upgradeHead = (path: string, extra = '') =>
  `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
  `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
  `Authorization: Bearer ${TOKEN}\r\n${extra}\r\n`;

/**
 * Ids no route may take: each in place of the agent's id, then of the session's (`..` and `%2E%2E` are
 * resolved away by a client's URL parser: sent raw below).
 */
const BAD_IDS = [
  'a%20b',
  '*',
  '%2A',
  '>',
  '%3E',
  'a.b',
  'a%2Fb',
  '%00',
  '%FF%FE',
  '%C0%AE',
  'caf%C3%A9',
  'a%0Ab',
  'x'.repeat(65),
  'x'.repeat(5000),
  '%',
];

describe('garbage at the voice socket and the gateway edge', () => {
  it('answers every malformed id in an upgrade 400, on its own, with no process harmed', async () => {
    const { sessionId } = await startVoice();
    for (const bad of BAD_IDS) {
      for (const path of [
        `/api/agents/${agentId}/voice-sessions/${bad}/audio`,
        `/api/agents/${bad}/voice-sessions/${sessionId}/audio`,
      ]) {
        const got = await upgrade(path);
        expect(got.status, `${path}: ${JSON.stringify(got)}`).toBe(400);
        expect(JSON.parse(got.body!)).toMatchObject({ code: 'VALIDATION_FAILED' });
      }
    }
    // a ticket can be made for such a path (it names a path, not an id): the upgrade it opens is checked alike
    const ticket = await http.post(
      '/api/tickets',
      { path: '/api/agents/x/voice-sessions/a%20b/audio' },
      auth,
    );
    if (ticket.status === 201) {
      const t = encodeURIComponent(String(ticket.body.ticket));
      expect((await upgrade(`/api/agents/x/voice-sessions/a%20b/audio?ticket=${t}`, {})).status).toBe(400);
    }
    // a well-formed id that names nothing: 4404, and the instance is not said to be gone
    expect(await upgrade(`/api/agents/${agentId}/voice-sessions/no-such-session/audio`)).toMatchObject({
      close: 4404,
    });
    expect(unhandled).toEqual([]);
  }, 60_000);

  it('answers malformed ids on every other route with ids 400: events, recording, the table', async () => {
    for (const bad of ['a%20b', '*', '%3E', 'a.b', '%FF', 'x'.repeat(65)]) {
      for (const path of [
        `/api/agents/${bad}/test-sessions/s/events`,
        `/api/agents/${agentId}/test-sessions/${bad}/events`,
        `/api/agents/${agentId}/test-sessions/${bad}/recording`,
        `/api/agents/${bad}/test-sessions/s/recording`,
        `/api/agents/${bad}`,
        `/api/agents/${agentId}/text-sessions/${bad}/turns`,
        `/api/agents/${agentId}/voice-sessions/${bad}`,
      ]) {
        const method = path.endsWith('/turns')
          ? 'POST'
          : path.includes('/voice-sessions/')
            ? 'DELETE'
            : 'GET';
        const res = await fetch(stack.baseUrl + path, {
          method,
          headers: { ...auth, accept: 'text/event-stream', 'content-type': 'application/json' },
          ...(method === 'POST' ? { body: '{"text":"hi"}' } : {}),
        });
        expect(res.status, `${method} ${path}`).toBe(400);
        expect(await res.json()).toMatchObject({ code: 'VALIDATION_FAILED' });
      }
    }
    expect(unhandled).toEqual([]);
  }, 60_000);

  it('survives sockets reset, destroyed or half-closed at every step of an upgrade and a request', async () => {
    const { sessionId } = await startVoice();
    const good = `/api/agents/${agentId}/voice-sessions/${sessionId}/audio`;
    // a ticket is checked on the bus (single-use: every use after the first is looked up, then refused): the
    // client is gone by the time its answer is written
    const nowhere = `/api/agents/${agentId}/voice-sessions/no-such-session/audio`;
    const ticket = (await http.post('/api/tickets', { path: nowhere }, auth)).body.ticket as string;
    const withTicket = `${nowhere}?ticket=${encodeURIComponent(ticket)}`;
    const attempts: Promise<string>[] = [];
    for (let i = 0; i < 5; i++) {
      for (const then of ['end', 'destroy', 'reset'] as const) {
        // the whole upgrade, then gone before (or while) it is answered
        attempts.push(raw([upgradeHead(good)], then));
        attempts.push(raw([upgradeHead(`/api/agents/x/voice-sessions/a%20b/audio`)], then));
        attempts.push(raw([upgradeHead(`/api/agents/${agentId}/voice-sessions/%3E/audio`)], then));
        attempts.push(raw([upgradeHead(withTicket).replace(/Authorization: .*\r\n/, '')], then));
        // half a request line, half the headers
        attempts.push(raw([`GET /api/agents/${agentId}/voice-sessions/`], then));
        attempts.push(raw([upgradeHead(good).slice(0, 60)], then));
        // an event stream and a body left behind
        attempts.push(
          raw(
            [
              `GET /api/agents/${agentId}/test-sessions/${sessionId}/events HTTP/1.1\r\n` +
                `Host: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`,
            ],
            then,
          ),
        );
        attempts.push(
          raw(
            [
              `POST /api/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n` +
                `Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"name":`,
            ],
            then,
          ),
        );
      }
    }
    await Promise.all(attempts);
    // requests that are not HTTP: each a 400 of ours, nothing more
    for (const garbage of [
      'GET /api/agents/a b/voice-sessions/c/audio HTTP/1.1\r\nHost: x\r\n\r\n',
      upgradeHead(`/api/agents/${agentId}/voice-sessions/%2E%2E/audio`),
      upgradeHead(`/api/agents/../voice-sessions/${sessionId}/audio`),
      Buffer.concat([
        Buffer.from('GET /api/agents/'),
        Buffer.from([0xff, 0xfe, 0x00]),
        Buffer.from(' HTTP/1.1\r\n\r\n'),
      ]),
      `GET /api/agents HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n`,
      `GET /api/agents HTTP/1.1\r\nHost: x\r\nX-Big: ${'x'.repeat(64 * 1024)}\r\n\r\n`,
      '\u0016\u0003\u0001\u0002\u0000\u0001\u0000\u0001\u00fc\u0003\u0003',
    ]) {
      const answer = await raw([garbage]);
      expect(answer, JSON.stringify(String(garbage).slice(0, 80))).toMatch(/^HTTP\/1\.1 4\d\d /);
    }
    // the session those upgrades named is unharmed: a real client still attaches (each upgrade that reached
    // it was the one client, then its close ended the session; a new one is started to check)
    expect(unhandled).toEqual([]);
  }, 90_000);

  it('closes a socket that sends bad frames with the close code of its fault, and ends its session', async () => {
    // each frame after the handshake, written as it is (ws masks what it sends; these are hand-made)
    const frames: [string, Buffer, number][] = [
      ['an unmasked frame', Buffer.from([0x82, 0x02, 0x00, 0x00]), 1002],
      ['reserved bits', Buffer.from([0xf2, 0x80, 0, 0, 0, 0]), 1002],
      ['an unknown opcode', Buffer.from([0x83, 0x80, 0, 0, 0, 0]), 1002],
      ['a text frame of invalid UTF-8', Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0xc3, 0x28]), 1007],
      ['a frame over 64 KiB', Buffer.from([0x82, 0xff, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0]), 1009],
      ['a fragmented control frame', Buffer.from([0x09, 0x80, 0, 0, 0, 0]), 1002],
    ];
    for (const [what, frame, code] of frames) {
      const { sessionId, audioPath } = await startVoice();
      const client = new VoiceClient({ url: wsUrl(audioPath), headers: auth });
      await client.ready;
      (client.socket as unknown as { _socket: Socket })._socket.write(frame);
      expect((await client.closed).code, what).toBe(code);
      await vi.waitFor(
        async () =>
          expect(
            (await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`, auth)).body.status,
          ).toBe('closed'),
        { timeout: 10_000 },
      );
    }
    expect(unhandled).toEqual([]);
  }, 120_000);

  it('is still up and answering afterwards: health, readiness, a voice session whose first message is ready', async () => {
    expect((await fetch(`${stack.baseUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${stack.baseUrl}/readyz`)).status).toBe(200);
    const { audioPath } = await startVoice();
    const ws = new WebSocket(wsUrl(audioPath), { headers: auth });
    const first = await new Promise<{ type: string }>((resolve, reject) => {
      ws.once('message', (data: Buffer) => resolve(JSON.parse(data.toString()) as { type: string }));
      ws.once('close', (code) => reject(new Error(`closed ${code}`)));
    });
    expect(first.type).toBe('ready');
    ws.close();
    expect(unhandled).toEqual([]);
  });
});
