import type { Call, CallList, DeployRecord } from '@vab/contracts';
import {
  CALLER_LEAD_MS,
  decodeRecording,
  lastUserText,
  launchChromiumCaller,
  levelOf,
  listenOnLoopback,
  VoiceClient,
  type OpenAiStub,
  type SpeechStub,
} from '@vab/testkit';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { watchedPage } from '../../helpers/pages.js';
import type { api, Stack } from '../../helpers/stack.js';
import { startVoiceStack, type VoiceStack } from '../../helpers/voice.js';

/**
 * A live deploy as the public meets it, in Debian's Chromium with a fake microphone (an espeak-ng WAV): the talk
 * page at /live/:subdomain and the widget embedded on another origin with a publishable key each call the live
 * version over the voice socket (LiveKit's real pipeline against the stub providers, with the agent's stored
 * key), the greeting is heard, the caller's turn is answered and Hang up ends the call; the call lists as
 * `web` with its transcript and figures, and the console's Calls panel shows it. The widget on an origin its
 * key does not list, with a revoked key, and the key used on the builder's API are refused, in words.
 */

const TOKEN = 'live-talk-token-0123456789';
const CREDENTIALS_KEY = randomBytes(32).toString('hex');
const STORED_KEY = `sk-live-talk-${randomBytes(12).toString('hex')}`;
const GREETING = 'Hello, how can I help?';
const SAID = 'I would like to book an appointment please';
const REPLY = 'Of course, we have a slot on Monday morning.';
/**
 * Bounds from talk.test.ts (the same pipeline on the same machine): the greeting within 20 s of the click, the
 * caller's words transcribed within 30 s, the answer heard within 20 s of them.
 */
const GREETING_MS = 20_000;
const TRANSCRIPT_MS = 30_000;
const ANSWER_MS = 20_000;
/**
 * Hang up: the page sends `end` and waits for the server's close (1000) up to talk-ui.js' HANG_UP_LIMIT_MS;
 * the call's record is ended by then or soon after (its end is stored before the socket closes).
 */
const HANG_UP_MS = 5000;
const DEPLOY_MS = 30_000;
/** An answer of the gateway's comes within its REQUEST_TIMEOUT_MS (its default). */
const REQUEST_TIMEOUT_MS = 5000;

let voice: VoiceStack;
let stack: Stack;
let http: ReturnType<typeof api>;
let chat: OpenAiStub;
let speech: SpeechStub;
let browser: Browser;
let site: Server;
/** The widget's site: allowed (`127.0.0.1`) and the same server under a name its key does not list. */
let siteOrigin = '';
let otherOrigin = '';
let agentId = '';
let subdomain = '';
const bearer = { authorization: `Bearer ${TOKEN}` };

/** The CSP docs/api.md gives a site that embeds the widget, for a gateway at `gateway`. */
const siteCsp = (gateway: string) =>
  [
    "default-src 'self'",
    `script-src 'self' ${gateway}`,
    `style-src 'self' ${gateway}`,
    `connect-src 'self' ${gateway} ${gateway.replace(/^http/, 'ws')}`,
  ].join('; ');

beforeAll(async () => {
  voice = await startVoiceStack({
    chat: (req) => ({ content: lastUserText(req).includes('appointment') ? REPLY : 'Sorry?' }),
    // the stub cannot recognize speech: every utterance is the caller's one sentence
    transcribe: () => SAID,
    stack: { security: { apiTokens: [TOKEN] }, playground: { CREDENTIALS_KEY } },
  });
  ({ stack, http, chat, speech } = voice);
  site = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://site');
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': siteCsp(stack.baseUrl),
    }).end(`<!doctype html><html><head><title>A clinic's site</title></head><body>
<h1>Welcome</h1>
<script src="${stack.baseUrl}/live/widget.js" data-agent="${url.searchParams.get('agent')}" data-key="${url.searchParams.get('key')}" defer></script>
</body></html>`);
  });
  const port = await listenOnLoopback(site);
  siteOrigin = `http://127.0.0.1:${port}`;
  otherOrigin = `http://localhost:${port}`;
  browser = await launchChromiumCaller(SAID);

  // the agent, its stored key (its models at the stubs get it: the builder's own key goes where the flow
  // points) and its live deploy
  const flow = voice.flow();
  agentId = (await http.post('/api/agents', { name: 'Front desk', flow }, bearer)).body.id as string;
  const stored = await http.put(
    `/api/agents/${agentId}/credentials`,
    { apiKeys: { openai: STORED_KEY } },
    bearer,
  );
  expect(stored.status, JSON.stringify(stored.body)).toBe(200);
  const deploy = (await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, {}, bearer)).body;
  subdomain = deploy.subdomain;
  await vi.waitFor(
    async () =>
      expect((await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`, bearer)).body[0]?.status).toBe(
        'live',
      ),
    { timeout: DEPLOY_MS, interval: 100 },
  );
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await voice?.close();
  site?.closeAllConnections();
  await new Promise<void>((r) => (site ? site.close(() => r()) : r()));
});

const stateOf = (talk: Locator) => talk.getAttribute('data-state');
const heard = async (talk: Locator) => Number((await talk.getAttribute('data-heard-samples')) ?? 0);

/**
 * One call as a caller makes it on a talk UI (the page's, or the widget's in its shadow root): the greeting
 * heard, the caller's words transcribed from the microphone, the answer heard, Hang up. The call's id.
 */
async function talkThrough(page: Page, talk: Locator): Promise<string> {
  await expect.poll(() => stateOf(talk)).toBe('idle');
  await talk.locator('button.call').click();
  // the greeting, shown and heard (non-silent samples reached the page's audio output)
  await expect
    .poll(() => talk.locator('li.agent').first().textContent(), { timeout: GREETING_MS })
    .toBe(GREETING);
  await expect.poll(() => heard(talk), { timeout: GREETING_MS }).toBeGreaterThan(0);
  expect(await talk.locator('button.call').textContent()).toBe('Hang up');
  // the caller's words, through the real pipeline, then the answer: shown and heard
  await expect
    .poll(() => talk.locator('li.user:not(.interim)').allTextContents(), { timeout: TRANSCRIPT_MS })
    .toEqual([SAID]);
  const beforeAnswer = await heard(talk);
  await expect
    .poll(() => talk.locator('li.agent').allTextContents(), { timeout: ANSWER_MS })
    .toEqual([GREETING, REPLY]);
  await expect.poll(() => heard(talk), { timeout: ANSWER_MS }).toBeGreaterThan(beforeAnswer);
  const callId = (await talk.getAttribute('data-call-id'))!;
  expect(callId).toMatch(/^[0-9a-f-]{36}$/);
  // the agent's state was shown as it changed (listening now: the answer has played)
  await expect.poll(() => stateOf(talk), { timeout: ANSWER_MS }).toBe('listening');
  expect(await talk.locator('.state').textContent()).toBe('Listening');

  await talk.locator('button.call').click();
  await expect.poll(() => stateOf(talk), { timeout: HANG_UP_MS }).toBe('ended');
  expect(await talk.locator('.status').textContent()).toBe('Call ended.');
  expect(await talk.locator('button.call').textContent()).toBe('Call again');
  return callId;
}

/** The call once its record is ended. */
async function endedCall(callId: string): Promise<Call> {
  const path = `/api/agents/${agentId}/calls/${callId}`;
  await expect
    .poll(async () => (await http.get<Call>(path, bearer)).body.status, { timeout: HANG_UP_MS })
    .toBe('ended');
  return (await http.get<Call>(path, bearer)).body;
}

function expectAnsweredCall(call: Call) {
  expect(call).toMatchObject({
    channel: 'web',
    endedReason: 'caller_hung_up',
    version: 1,
  });
  expect(call.messages.map((m) => [m.role, m.content])).toEqual([
    ['assistant', GREETING],
    ['user', SAID],
    ['assistant', REPLY],
  ]);
  // the answered turn's figures: what the caller waited, and where the time went
  expect(call.figures?.turns).toBeGreaterThanOrEqual(1);
  expect(call.figures?.responseMs?.p50).toBeGreaterThan(0);
  expect(call.figures?.llmTtftMs?.p50).toBeGreaterThan(0);
  expect(call.durationMs).toBeGreaterThan(CALLER_LEAD_MS);
  expect(call.caller.addressHash).toMatch(/^[A-Za-z0-9_-]{32}$/);
}

describe('the talk page in Chromium with a fake microphone', () => {
  it('the greeting is heard, the caller is answered, Hang up ends the call; it lists as web with its transcript and figures', async () => {
    const { page, problems } = await watchedPage(browser);
    // no token: the public page is open while the builder's API needs one
    await page.goto(`${stack.baseUrl}/live/${subdomain}`);
    const talk = page.locator('section.vab-talk');
    const callId = await talkThrough(page, talk);
    await page.screenshot({ path: '/tmp/live-page-call.png' });

    const call = await endedCall(callId);
    expectAnsweredCall(call);
    // the agent ran with the agent's stored key (the page sent none): the models at the flow's addresses got it
    expect(chat.authorizations).toContain(`Bearer ${STORED_KEY}`);
    expect(speech.requests.transcriptions.map((t) => t.authorization)).toContain(`Bearer ${STORED_KEY}`);
    // its stereo recording: the browser's microphone on the left, the agent on the right
    const path = `/api/agents/${agentId}/calls/${callId}`;
    await expect
      .poll(async () => (await http.get<Call>(path, bearer)).body.recording, { timeout: HANG_UP_MS })
      .toMatchObject({ durationMs: expect.any(Number), bytes: expect.any(Number) });
    const file = new Uint8Array(
      await (await fetch(`${stack.baseUrl}${path}/recording`, { headers: bearer })).arrayBuffer(),
    );
    const decoded = await decodeRecording(file);
    expect(decoded).toMatchObject({ codec: 'opus', channels: 2 });
    expect(levelOf(decoded.left, decoded.sampleRate, 0, decoded.durationMs)).toBeGreaterThan(100);
    expect(levelOf(decoded.right, decoded.sampleRate, 0, decoded.durationMs)).toBeGreaterThan(100);
    const listed = await http.get<CallList>(`/api/agents/${agentId}/calls?channel=web`, bearer);
    expect(listed.body.calls.map((c) => c.id)).toContain(callId);
    // the key never reached the page, nor the call's record
    expect(await page.content()).not.toContain(STORED_KEY);
    expect(JSON.stringify(call)).not.toContain(STORED_KEY);
    expect(problems).toEqual([]);
    await page.close();

    // the builder finds it in the console's Calls panel: its transcript, as the caller saw it
    const consolePage = await watchedPage(browser);
    const c = consolePage.page;
    const refused: string[] = [];
    c.on('response', (r) => {
      if (r.status() >= 400)
        refused.push(`${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`);
    });
    await c.addInitScript({ content: `sessionStorage.setItem('vab-console-token', '${TOKEN}')` });
    await c.goto(`${stack.baseUrl}/console`);
    await c.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
    await c.selectOption('#agent', agentId);
    const row = c.locator(`#calls button[data-call-id="${callId}"]`);
    await row.waitFor();
    expect(await row.locator('.what').textContent()).toMatch(
      /^v1 · #1 · \d+\.\d s · caller hung up · response p50 \d+ ms$/,
    );
    await row.click();
    await expect.poll(() => c.locator('#log li.agent').allTextContents()).toEqual([GREETING, REPLY]);
    expect(await c.locator('#log li.user').allTextContents()).toEqual([SAID]);
    // replayed from the call's events, beside its recording (streamed with a ticket: tokens are on)
    await expect.poll(() => c.locator('#log li.event').last().textContent()).toMatch(/^Session ended/);
    await c.locator('#recording:visible').waitFor();
    expect(await c.locator('#recording').getAttribute('src')).toMatch(
      new RegExp(`/calls/${callId}/recording\\?ticket=`),
    );
    await c.screenshot({ path: '/tmp/console-live-call.png' });
    expect(refused).toEqual([]);
    expect(consolePage.problems).toEqual([]);
    await c.close();
  }, 120_000);
});

describe('the widget on another origin', () => {
  let key = '';
  let keyId = '';

  it('talks from an allowed origin with its publishable key', async () => {
    const created = await http.post(
      `/api/agents/${agentId}/public-keys`,
      { allowedOrigins: [siteOrigin], label: 'Clinic site' },
      bearer,
    );
    expect(created.status).toBe(201);
    ({ key, id: keyId } = created.body as { key: string; id: string });

    const { page, problems } = await watchedPage(browser);
    const starts: { origin?: string; authorization?: string }[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith(`/live/${subdomain}/calls`))
        void r
          .allHeaders()
          .then((h) => starts.push({ origin: h['origin'], authorization: h['authorization'] }));
    });
    await page.goto(`${siteOrigin}/?agent=${subdomain}&key=${key}`);
    // the widget's UI, in its shadow root on the site's page
    const talk = page.locator('div.vab-widget section.vab-talk');
    const callId = await talkThrough(page, talk);
    await page.screenshot({ path: '/tmp/live-widget-call.png' });
    // the start came from the site's page with the key
    expect(starts).toEqual([{ origin: siteOrigin, authorization: `Bearer ${key}` }]);
    expectAnsweredCall(await endedCall(callId));
    expect(problems).toEqual([]);
    await page.close();
  }, 120_000);

  /** The widget's call on `origin`, refused: what the caller reads, and that no call was made. */
  async function refusedOn(origin: string, withKey: string): Promise<string> {
    const before = (await http.get<CallList>(`/api/agents/${agentId}/calls`, bearer)).body.calls.length;
    const { page, problems } = await watchedPage(browser);
    await page.goto(`${origin}/?agent=${subdomain}&key=${withKey}`);
    const talk = page.locator('div.vab-widget section.vab-talk');
    await expect.poll(() => stateOf(talk)).toBe('idle');
    await talk.locator('button.call').click();
    await expect.poll(() => stateOf(talk), { timeout: HANG_UP_MS }).toBe('error');
    const said = (await talk.locator('.status').textContent())!;
    expect(await talk.locator('.status').getAttribute('role')).toBe('alert');
    expect(await talk.locator('button.call').textContent()).toBe('Call again');
    expect(await talk.locator('li').count()).toBe(0);
    // the browser's own line for the refused start (a 401 on the network) is all that went wrong
    expect(problems).toEqual([expect.stringMatching(/status of 401/)]);
    await page.close();
    expect((await http.get<CallList>(`/api/agents/${agentId}/calls`, bearer)).body.calls).toHaveLength(
      before,
    );
    return said;
  }

  it('is refused on an origin its key does not list', async () => {
    expect(key).not.toBe('');
    expect(await refusedOn(otherOrigin, key)).toBe(
      'This site may not call this agent: this key may not start calls of this agent from this origin',
    );
  }, 60_000);

  it('is refused with a revoked key, and the key is useless on the builder API', async () => {
    expect(key).not.toBe('');
    // on the builder's API a publishable key is no token: refused, saying where it works
    const misused = await http.get('/api/agents', { authorization: `Bearer ${key}` });
    expect(misused.status).toBe(401);
    expect(misused.body).toMatchObject({
      code: 'UNAUTHORIZED',
      message: 'a publishable key is accepted on /live routes only',
    });
    expect(JSON.stringify(misused.body)).not.toContain('Front desk');
    const revoked = await http.delete(`/api/agents/${agentId}/public-keys/${keyId}`, undefined, bearer);
    expect(revoked.status).toBe(200);
    expect(await refusedOn(siteOrigin, key)).toBe(
      'This site may not call this agent: this key may not start calls of this agent from this origin',
    );
  }, 60_000);
});

describe('the talk page when the deploy is full', () => {
  it('says the agent is busy, counts down its Retry-After, and the refusal lists as a busy call', async () => {
    const live = (await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`, bearer)).body[0]!;
    expect(
      (await http.patch(`/api/agents/${agentId}/deploys/${live.id}`, { maxConcurrentCalls: 1 }, bearer))
        .status,
    ).toBe(200);
    // another caller holds the one line (a start without Origin is our own page's)
    const res = await fetch(`${stack.baseUrl}/live/${subdomain}/calls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ audio: { sampleRate: 16000, frameMs: 20 } }),
    });
    expect(res.status).toBe(201);
    const held = (await res.json()) as { callId: string; audioPath: string };
    const client = new VoiceClient({ url: stack.baseUrl.replace(/^http/, 'ws') + held.audioPath });
    const { page, problems } = await watchedPage(browser);
    try {
      await client.ready;
      await page.goto(`${stack.baseUrl}/live/${subdomain}`);
      const talk = page.locator('section.vab-talk');
      await expect.poll(() => stateOf(talk)).toBe('idle');
      await talk.locator('button.call').click();
      await expect.poll(() => stateOf(talk)).toBe('busy');
      expect(await talk.locator('.state').textContent()).toBe('Busy');
      expect(await talk.locator('.status').textContent()).toMatch(
        /^The agent is busy right now\. Try again in [1-5] s\. \(.+\)$/,
      );
      expect(await talk.locator('button.call').isDisabled()).toBe(true);
      // the button comes back once the server's Retry-After (5 s for a deploy's cap) has passed
      await expect
        .poll(() => talk.locator('.status').textContent(), { timeout: 5000 + REQUEST_TIMEOUT_MS })
        .toMatch(/^The agent was busy \(.+\)\. Try again now\.$/);
      expect(await talk.locator('button.call').isEnabled()).toBe(true);
      // the missed call is recorded for the builder
      const busy = await http.get<CallList>(`/api/agents/${agentId}/calls?endedReason=busy`, bearer);
      expect(busy.body.calls).toHaveLength(1);
      expect(busy.body.calls[0]).toMatchObject({
        channel: 'web',
        endedDetail: { kind: 'max_concurrent_calls' },
      });
      // the browser's own line for the 429 is all that went wrong
      expect(problems).toEqual([expect.stringMatching(/status of 429/)]);
    } finally {
      await page.close();
      client.close();
      await client.closed;
      await http.patch(`/api/agents/${agentId}/deploys/${live.id}`, { maxConcurrentCalls: 10 }, bearer);
    }
  }, 60_000);
});
