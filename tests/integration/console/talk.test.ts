import { lastUserText, launchChromiumCaller, startDeepgramStub, type SpeechStub } from '@vab/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchedPage } from '../../helpers/pages.js';
import type { api, Stack } from '../../helpers/stack.js';
import { startVoiceStack, type VoiceStack } from '../../helpers/voice.js';

/**
 * Talk in the console, in Debian's Chromium: its fake microphone plays an espeak-ng WAV into the page's
 * AudioWorklet, the page streams it over the voice socket to LiveKit's real pipeline (VAD, end of turn, STT,
 * LLM, TTS against the stub providers on loopback), and plays the agent's audio back through its own
 * worklet, which counts the non-silent samples it rendered.
 */

const TOKEN = 'talk-token-0123456789';
const KEY = 'sk-talk-test-key-0123456789';
const SAID = 'I would like to book an appointment please';
const LONG_REPLY =
  'Of course. We have appointments on Monday, Tuesday and Wednesday mornings, and on Thursday ' +
  'afternoon, and our doctors can see you for a check up, a vaccination or a longer consultation. ' +
  'Please bring your insurance card and arrive ten minutes early so that we can prepare everything.';
const SECOND = 'Stop. What time is it?';
const REPLY = 'It is nine o clock.';
/**
 * The caller talks over the long answer this long after their first words end: the answer starts about a
 * second after them and lasts ~16 s, so this lands in it even on a loaded machine (its start up to ~6 s late).
 */
const BARGE_IN_AFTER_MS = 7000;
/**
 * The gateway's REQUEST_TIMEOUT_MS (its default): Stop's DELETE answers within it (504 after), and only once the
 * session has stopped, its session_ended stored (docs/api.md): the bound on the "Session ended" line.
 */
const REQUEST_TIMEOUT_MS = 5000;
/** How much of a message the recording test listens to. */
const LISTEN_S = 2.5;

let voice: VoiceStack;
let stack: Stack;
let http: ReturnType<typeof api>;
let speech: SpeechStub;
let browser: Browser;
const bearer = { authorization: `Bearer ${TOKEN}` };

beforeAll(async () => {
  voice = await startVoiceStack({
    chat: (req) => ({ content: lastUserText(req).includes('appointment') ? LONG_REPLY : REPLY }),
    transcribe: (i) => [SAID, SECOND][i] ?? '',
    stack: { security: { apiTokens: [TOKEN] }, requestTimeoutMs: REQUEST_TIMEOUT_MS },
  });
  ({ stack, http, speech } = voice);
  // the caller's two turns
  browser = await launchChromiumCaller(SAID, BARGE_IN_AFTER_MS, SECOND);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await voice?.close();
});

/** Every state the agent indicator shows, in order, kept in the page as `window.agentStates`. */
const AGENT_STATES = `window.agentStates = [];
  new MutationObserver(() => {
    const s = document.getElementById('agent-state')?.dataset.state;
    if (s && window.agentStates.at(-1) !== s) window.agentStates.push(s);
  }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-state'] });`;

const heard = (page: Page) => page.evaluate<number>('window.vabTalk.heardSamples');

/**
 * Stop, as the user clicks it: the page sends `end` and DELETEs the session. Its "Session ended" line comes with
 * the session_ended event, which the session stores only once it has stopped (the LiveKit session closed, the
 * recording encoded and stored, the record closed: over a second on a loaded machine). Its DELETE answers then
 * too, within the gateway's REQUEST_TIMEOUT_MS: the line is waited for that long, not a guess.
 */
async function stopTalking(page: Page) {
  const deleted = page.waitForResponse(
    (r) => r.request().method() === 'DELETE' && r.url().includes('/voice-sessions/'),
  );
  await page.click('#talk');
  expect((await deleted).status()).toBe(200);
  await expect
    .poll(() => page.locator('#log li.event').last().textContent(), { timeout: REQUEST_TIMEOUT_MS })
    .toMatch(/^Session ended \(client ended\)/);
}

describe('Talk in the console, in Chromium with a fake microphone', () => {
  let agentId = '';
  let sessionId = '';
  let page: Page;
  let problems: string[];

  it('talks: the caller is transcribed, replies are heard, a barge-in cuts one; Stop ends the session', async () => {
    const flow = voice.flow();
    const created = await http.post('/api/agents', { name: 'Talking clinic', flow }, bearer);
    expect(created.status).toBe(201);
    agentId = created.body.id as string;

    ({ page, problems } = await watchedPage(browser, AGENT_STATES));
    // the token as the page keeps it once asked (this tab's sessionStorage): every call and ticket carries it
    await page.addInitScript({ content: `sessionStorage.setItem('vab-console-token', '${TOKEN}')` });
    await page.goto(`${stack.baseUrl}/console`);
    await page.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
    await page.selectOption('#agent', agentId);
    await page.click('#keys-box summary');
    await page.fill('#keys', `openai=${KEY}`);
    await page.locator('#talk:visible').waitFor();
    await page.click('#talk');
    await expect.poll(() => page.locator('#talk').textContent()).toBe('Stop');

    const log = page.locator('#log');
    // the greeting, heard: non-silent samples reached the page's output
    await expect
      .poll(() => log.locator('li.agent').first().textContent(), { timeout: 20_000 })
      .toBe('Hello, how can I help?');
    await expect.poll(() => heard(page), { timeout: 10_000 }).toBeGreaterThan(0);
    // the caller's words, from the microphone's audio through the real pipeline
    await expect
      .poll(() => log.locator('li.user:not(.interim)').allTextContents(), { timeout: 30_000 })
      .toEqual([SAID]);
    const beforeReply = await heard(page);
    const rate = await page.evaluate<number>('window.vabTalk.outputRate');
    // the answer, heard: at least a second of sound more than before it
    await expect.poll(() => heard(page), { timeout: 20_000 }).toBeGreaterThan(beforeReply + rate);
    // the caller talks over it: the page stops playing at once, says how much was heard, and shows it
    await expect
      .poll(() => log.locator('li.event.interrupt').textContent(), { timeout: 20_000 })
      .toMatch(/^Interrupted the agent stopped after \d+\.\d s of its reply$/);
    await expect
      .poll(() => log.locator('li.user:not(.interim)').allTextContents(), { timeout: 30_000 })
      .toEqual([SAID, SECOND]);
    const beforeSecond = await heard(page);
    await expect.poll(() => heard(page), { timeout: 20_000 }).toBeGreaterThan(beforeSecond + rate / 2);
    await expect.poll(() => log.locator('li.agent').count(), { timeout: 20_000 }).toBe(3);
    const [greeting, cut, answer] = await log.locator('li.agent').allTextContents();
    expect(greeting).toBe('Hello, how can I help?');
    // the interrupted answer as far as it was played here (what the page reported), not all of it
    expect(LONG_REPLY.startsWith(cut!)).toBe(true);
    expect(cut!.length).toBeGreaterThan(0);
    expect(cut!.length).toBeLessThan(LONG_REPLY.length * 0.7);
    expect(answer).toBe(REPLY);
    // what the server heard from the page: real speech at the session's rate, cut by the VAD (which may
    // also cut "Stop." from the rest)
    expect(speech.requests.transcriptions.length).toBeGreaterThanOrEqual(2);
    const utterance = speech.requests.transcriptions[0]!.durationMs;
    expect(utterance).toBeGreaterThan(1500);
    expect(utterance).toBeLessThan(10_000);
    expect(speech.requests.transcriptions[0]!.authorization).toBe(`Bearer ${KEY}`);

    const states = await page.evaluate<string[]>('window.agentStates');
    expect(states).toEqual(expect.arrayContaining(['listening', 'thinking', 'speaking']));
    expect(await page.locator('#flow .node.current').getAttribute('data-node-id')).toBe('talk');
    // each answer's figures, the cut one's too, once it is stored: the second answer has played out
    await expect.poll(() => log.locator('li.event.figures').count(), { timeout: 20_000 }).toBe(2);
    for (const line of await log.locator('li.event.figures').allTextContents())
      expect(line).toMatch(
        /^Turn response \d+ ms · first audio \d+ ms · transcript \d+ ms · end of turn \d+ ms/,
      );
    await expect.poll(() => page.locator('#chart rect.bar-e2eLatencyMs').count()).toBeGreaterThanOrEqual(1);
    await page.screenshot({ path: '/tmp/console-talk.png' });

    const sessions = await http.get(`/api/agents/${agentId}/test-sessions`, bearer);
    sessionId = (sessions.body as { id: string; sessionType: string }[]).find(
      (s) => s.sessionType === 'voice',
    )!.id;
    expect((await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`, bearer)).body).toMatchObject({
      status: 'open',
    });
    await stopTalking(page);
    await expect.poll(() => page.locator('#talk').textContent()).toBe('Talk');
    await expect
      .poll(async () => (await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`, bearer)).body)
      .toMatchObject({ status: 'closed' });
    const messages = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`, bearer);
    expect((messages.body as { role: string; content: string }[]).map((m) => m.content)).toEqual([
      greeting,
      SAID,
      cut,
      SECOND,
      REPLY,
    ]);
    expect(problems).toEqual([]);
  }, 120_000);

  it('plays the recording beside the transcript: a message clicked is heard, and highlighted while it plays', async () => {
    expect(sessionId).not.toBe('');
    const path = `/api/agents/${agentId}/test-sessions/${sessionId}`;
    // the recording is stored as the session closes
    await expect
      .poll(async () => (await http.get(path, bearer)).body.recording, { timeout: 20_000 })
      .toMatchObject({ durationMs: expect.any(Number), startedAt: expect.any(Number) });
    const { recording } = (await http.get(path, bearer)).body as {
      recording: { durationMs: number; startedAt: number };
    };

    // the player's first read is refused, as the gateway refuses one whose ticket expired: the page asks for
    // a new ticket and reads on (the reads after it reach the gateway)
    const tickets: string[] = [];
    await page.route(
      (u) => u.pathname === `${path}/recording`,
      (route) => {
        tickets.push(new URL(route.request().url()).searchParams.get('ticket') ?? '');
        if (tickets.length > 1) return route.continue();
        return route.fulfill({ status: 401, json: { code: 'UNAUTHORIZED', message: 'unauthorized' } });
      },
    );
    await page.click('#refresh');
    await page.click(`#sessions button[data-session-id="${sessionId}"]`);
    const log = page.locator('#log');
    await expect.poll(() => log.locator('li.event').last().textContent()).toMatch(/^Session ended/);
    await page.locator('#recording:visible').waitFor();
    // streamed by the element with a ticket (tokens are on: it cannot send the header), the whole of it
    expect(await page.locator('#recording').getAttribute('src')).toMatch(/\/recording\?ticket=/);
    await expect
      .poll(() => page.evaluate<number>("document.getElementById('recording').duration"), { timeout: 10_000 })
      .toBeCloseTo(recording.durationMs / 1000, 0);

    // what each channel of the recording sounds like as the page plays it (left: the caller, right: the agent)
    await page.evaluate(`(() => {
      const audio = document.getElementById('recording');
      const ctx = new AudioContext();
      const source = ctx.createMediaElementSource(audio);
      const split = ctx.createChannelSplitter(2);
      source.connect(split);
      source.connect(ctx.destination);
      const meters = [0, 1].map((ch) => {
        const a = ctx.createAnalyser();
        a.fftSize = 1024;
        split.connect(a, ch);
        return a;
      });
      const buf = new Float32Array(1024);
      window.loud = { left: 0, right: 0 };
      setInterval(() => {
        if (audio.paused) return;
        ['left', 'right'].forEach((side, i) => {
          meters[i].getFloatTimeDomainData(buf);
          if (buf.some((v) => Math.abs(v) >= 0.02)) window.loud[side]++;
        });
      }, 20);
    })()`);
    const listen = async (bubble: ReturnType<typeof log.locator>) => {
      await page.evaluate('window.loud.left = 0; window.loud.right = 0');
      const at = Number(await bubble.getAttribute('data-at'));
      await bubble.click();
      await expect
        .poll(() => page.evaluate<number>("document.getElementById('recording').currentTime"))
        .toBeGreaterThanOrEqual(Math.max(0, (at - recording.startedAt) / 1000) - 0.05);
      await expect.poll(() => bubble.getAttribute('class')).toContain('heard');
      // heard for LISTEN_S (or to the end): by the recording's own clock, not the test's
      const until =
        (await page.evaluate<number>("document.getElementById('recording').currentTime")) + LISTEN_S;
      await expect
        .poll(
          () =>
            page.evaluate<boolean>(
              `(() => { const a = document.getElementById('recording'); return a.ended || a.currentTime >= ${until}; })()`,
            ),
          // it plays in real time: LISTEN_S, and as long again for a machine that stalls the playback
          { timeout: 2 * LISTEN_S * 1000 },
        )
        .toBe(true);
      await page.evaluate("document.getElementById('recording').pause()");
      return page.evaluate<{ left: number; right: number }>('window.loud');
    };

    // the caller's words: sound on the left while the caller's message is the one highlighted
    const user = log.locator('li.user', { hasText: SAID });
    const caller = await listen(user);
    expect(caller.left).toBeGreaterThan(10);
    expect(await log.locator('li.heard').count()).toBe(1);
    // played on, the highlight follows the recording to the answer the caller then heard
    await page.evaluate("void document.getElementById('recording').play()");
    const cutAnswer = log.locator('li.agent').nth(1);
    await expect.poll(() => cutAnswer.getAttribute('class'), { timeout: 10_000 }).toContain('heard');
    expect(await log.locator('li.heard').count()).toBe(1);
    await page.evaluate("document.getElementById('recording').pause()");
    // the agent's reply: sound on the right, and the highlight moved to it
    const reply = log.locator('li.agent', { hasText: REPLY });
    const agent = await listen(reply);
    expect(agent.right).toBeGreaterThan(10);
    expect(await user.getAttribute('class')).not.toContain('heard');
    await page.screenshot({ path: '/tmp/console-recording.png' });
    // a new ticket after the refused read; the browser reported that refusal, and nothing else went wrong
    expect(tickets.length).toBeGreaterThanOrEqual(2);
    expect(tickets[1]).not.toBe(tickets[0]);
    expect(problems).toEqual([expect.stringMatching(/status of 401/)]);
    await page.close();
  }, 60_000);
});

describe('Talk shows what the caller says as it is recognized', () => {
  it("with a streaming STT (Deepgram's live API): an interim transcript, then the final one in its place", async () => {
    // Deepgram's stub sends the first half of the words while the caller still speaks, then all of them
    const deepgram = await startDeepgramStub({ transcribe: () => SAID });
    const { page, problems } = await watchedPage(browser, AGENT_STATES);
    try {
      const flow = voice.flow();
      flow.nodes = flow.nodes.map((n) =>
        n.id === 'stt' ? { id: 'stt', nodeType: 'stt', provider: 'deepgram', baseURL: deepgram.baseURL } : n,
      );
      const created = await http.post('/api/agents', { name: 'Streaming clinic', flow }, bearer);
      expect(created.status).toBe(201);
      const agentId = created.body.id as string;
      // every transcript the page showed, in order: the interim bubble's text, then the final bubble's
      await page.addInitScript({
        content: `window.transcripts = [];
          new MutationObserver(() => {
            for (const li of document.querySelectorAll('#log li.user')) {
              const shown = (li.classList.contains('interim') ? 'interim: ' : 'final: ') + li.textContent;
              if (li.textContent && !window.transcripts.includes(shown)) window.transcripts.push(shown);
            }
          }).observe(document, { subtree: true, childList: true, characterData: true });`,
      });
      await page.addInitScript({ content: `sessionStorage.setItem('vab-console-token', '${TOKEN}')` });
      await page.goto(`${stack.baseUrl}/console`);
      await page.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
      await page.selectOption('#agent', agentId);
      await page.click('#keys-box summary');
      await page.fill('#keys', `openai=${KEY}\ndeepgram=dg-talk-key-0123456789`);
      await page.locator('#talk:visible').waitFor();
      await page.click('#talk');
      const log = page.locator('#log');
      await expect
        .poll(() => log.locator('li.user:not(.interim)').allTextContents(), { timeout: 30_000 })
        .toEqual([SAID]);
      expect(await page.evaluate<string[]>('window.transcripts')).toEqual([
        'interim: I would like to',
        `final: ${SAID}`,
      ]);
      // the interim bubble gave way to the final one
      expect(await log.locator('li.interim').count()).toBe(0);
      expect(deepgram.streams[0]!.finals).toEqual([SAID]);
      await stopTalking(page);
      expect(problems).toEqual([]);
    } finally {
      await page.close();
      await deepgram.close();
    }
  }, 60_000);
});
