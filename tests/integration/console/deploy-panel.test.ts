import type { BusClient } from '@vab/bus';
import { Subjects, type CallSummary, type DeployRecord } from '@vab/contracts';
import { launchChromium, VoiceClient } from '@vab/testkit';
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stubAnalyst } from '../../helpers/analyst.js';
import { holdBusCall, type CallLine } from '../../helpers/live.js';
import { watchedPage } from '../../helpers/pages.js';
import type { api, Stack } from '../../helpers/stack.js';
import { startVoiceStack, type VoiceStack } from '../../helpers/voice.js';

/**
 * The console's Deploy, Keys for callers and Calls panels in Chromium against a real stack (issue 45): a
 * builder deploys a version with its call settings and sees it live (the talk page's link), sees a version
 * whose readiness fails go `failed` with its issue, stores the missing key and deploys it, rolls back to the
 * older version (its caps kept), creates a publishable key and sees the widget's snippet with it, revokes it,
 * and finds a public call in the Calls panel with its transcript. Then issue 47's parts: the analysis settings
 * saved from the page (a refused one's issue shown at its line), calls analysed by the stub analyst (tests/helpers/analyst.ts,
 * as tests/integration/live/call-analysis.test.ts plays it) shown with their summary and verdicts, the success and
 * criterion filters, a re-run after the criteria changed, and two deploys' stats side by side.
 */

const CREDENTIALS_KEY = randomBytes(32).toString('hex');
const STORED_KEY = `sk-stored-${randomBytes(12).toString('hex')}`;
const SHOP = 'https://shop.example.com';
/**
 * The deploy pipeline decides within its readiness check's bound (a start's validation): the console follows
 * it; a loaded machine took a few seconds, so every wait on it has this bound (tests/integration/live/ uses
 * the same).
 */
const DEPLOY_MS = 30_000;
/** What shows after a click comes with one API answer, within the gateway's REQUEST_TIMEOUT_MS. */
const REQUEST_TIMEOUT_MS = 5000;
vi.setConfig({ expect: { poll: { timeout: REQUEST_TIMEOUT_MS } } });

let voice: VoiceStack;
let stack: Stack;
let http: ReturnType<typeof api>;
let bus: BusClient;
let browser: Browser;

beforeAll(async () => {
  voice = await startVoiceStack({
    chat: stubAnalyst,
    transcribe: () => '',
    stack: {
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      playground: { CREDENTIALS_KEY },
      // two judged calls a side let the canary test's rollback come from four calls (the default is 20)
      canary: { minCalls: 2 },
    },
  });
  ({ stack, http, bus } = voice);
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await voice?.close();
});

/** A version whose models run on the stubs (at their own base URLs: no key needed). */
const stubFlow = () => voice.flow();
/** A version whose model is OpenAI's own: ready for callers only with the agent's stored key. */
const openAiFlow = () => {
  const f = stubFlow();
  return {
    ...f,
    nodes: f.nodes.map((n) =>
      n.id === 'llm' ? { id: 'llm', nodeType: 'llm', provider: 'openai', model: 'gpt-4o-mini' } : n,
    ),
  };
};

/** A call's lines, alternating from the agent's greeting. */
const spoken = (lines: string[]): CallLine[] =>
  lines.map((content, i) => ({ role: i % 2 ? 'user' : 'assistant', content }));

const deploysOf = async (agentId: string) =>
  (await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`)).body;

/** Deploys the version picked in the panel and waits for the pipeline's verdict on it, as the page shows it. */
async function deployInPage(page: Page, version: number): Promise<void> {
  const before = await page.locator('#deploys li[data-deploy-id]').count();
  await page.selectOption('#deploy-version', String(version));
  await page.click('#deploy');
  await expect
    .poll(() => page.locator('#deploys li[data-deploy-id]').count(), { timeout: DEPLOY_MS })
    .toBe(before + 1);
  await expect
    .poll(() => page.locator('#deploys li[data-deploy-id]').first().getAttribute('data-status'), {
      timeout: DEPLOY_MS,
    })
    .toMatch(/^(live|failed)$/);
}

/**
 * The console in a watched page (tests/helpers/pages.ts) with the agent chosen; `refused`: every answer of
 * 400 or more the page got, as `<status> <url>`.
 */
async function consoleOf(agentId: string): Promise<{ page: Page; problems: string[]; refused: string[] }> {
  const { page, problems } = await watchedPage(browser);
  const refused: string[] = [];
  page.on('response', (r) => {
    if (r.status() >= 400) refused.push(`${r.status()} ${r.url()}`);
  });
  await page.goto(`${stack.baseUrl}/console`);
  await page.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
  await page.selectOption('#agent', agentId);
  return { page, problems, refused };
}

/** The page logged nothing but the browser's own line for each refused answer; then it is closed. */
async function closeLoggingOnly(page: Page, problems: string[], refused: string[]): Promise<void> {
  expect(problems).toEqual(
    refused.map(() => expect.stringMatching(/^console error: Failed to load resource/)),
  );
  await page.close();
}

describe('the Deploy, Keys for callers and Calls panels', () => {
  it('deploys with settings, fails a version without keys, stores its key, rolls back; keys and the snippet; a call listed', async () => {
    const created = await http.post('/api/agents', { name: 'Deploy desk', flow: stubFlow() });
    expect(created.status).toBe(201);
    const agentId = created.body.id as string;
    expect((await http.patch(`/api/agents/${agentId}`, { flow: openAiFlow() })).body.version).toBe(2);

    const { page, problems, refused } = await consoleOf(agentId);
    await expect.poll(() => page.locator('#deploys').textContent()).toBe('No deploys yet.');
    expect(await page.locator('#deploy-live').textContent()).toBe('Not live: no deploy answers callers.');
    // the form starts from the contract's defaults
    await page.click('#deploy-settings summary');
    expect(await page.locator('#set-max-concurrent').inputValue()).toBe('10');
    expect(await page.locator('#set-max-duration').inputValue()).toBe('600');
    expect(await page.locator('#set-daily-cap').inputValue()).toBe('');

    // version 1 with its settings: live, its page's link and its settings shown
    await page.fill('#set-max-concurrent', '3');
    await page.fill('#set-daily-cap', '500');
    await page.fill('#set-max-duration', '120');
    await page.fill('#set-end-message', 'Time is up, goodbye.');
    await deployInPage(page, 1);
    const first = (await deploysOf(agentId))[0]!;
    expect(first).toMatchObject({
      status: 'live',
      version: 1,
      maxConcurrentCalls: 3,
      dailyCallCap: 500,
      maxCallDurationMs: 120_000,
      silenceTimeoutMs: 60_000,
      endCallMessage: 'Time is up, goodbye.',
    });
    const pageUrl = `${stack.baseUrl}/live/${first.subdomain}`;
    await expect
      .poll(() => page.locator('#deploy-live').textContent())
      .toBe(
        `Live: version 1 (deploy #1) · ${pageUrl} · 3 at once · 500 a day · calls up to 120 s · ` +
          '60 s of silence ends one',
      );
    expect(await page.locator('#live-link').getAttribute('href')).toBe(pageUrl);
    // the link is the public page, answering without a token
    expect((await fetch(pageUrl)).status).toBe(200);

    // version 2's model has no key a public caller's start could use: failed, with the issue
    await deployInPage(page, 2);
    const failed = page.locator('#deploys li[data-deploy-id]').first();
    expect(await failed.getAttribute('data-status')).toBe('failed');
    expect(await failed.locator('.failure').allTextContents()).toEqual(
      expect.arrayContaining([expect.stringContaining('(MISSING_CREDENTIALS)')]),
    );
    // still live: version 1
    expect(await page.locator('#deploy-live').getAttribute('data-version')).toBe('1');
    await expect.poll(() => page.locator('#status').textContent()).toBe('Deploy #2 of v2: failed');

    // the key, stored from the page: shown as set with its last 4, never again in full
    expect(await page.locator('#stored-keys').textContent()).toBe('None stored.');
    await page.fill('#stored-input', `openai=${STORED_KEY}`);
    await page.click('#stored-form button[type="submit"]');
    await expect
      .poll(() => page.locator('#stored-keys li[data-provider="openai"]').textContent())
      .toBe(`openai · …${STORED_KEY.slice(-4)} Remove`);
    expect(await page.locator('#stored-input').inputValue()).toBe('');
    // a provider the server does not know: its 400 said, the box kept to be corrected
    await page.fill('#stored-input', 'acme=x');
    await page.click('#stored-form button[type="submit"]');
    await expect
      .poll(() => page.locator('#status').textContent())
      .toMatch(/^Storing the keys failed — .*acme/);
    expect(await page.locator('#stored-input').inputValue()).toBe('acme=x');

    // version 2 again: live now, version 1 superseded with its rollback button
    await deployInPage(page, 2);
    await expect.poll(() => page.locator('#deploy-live').getAttribute('data-version')).toBe('2');
    const back = page.locator('#deploys button.rollback', { hasText: 'Roll back to v1' });
    await back.click();
    await expect
      .poll(() => page.locator('#deploy-live').getAttribute('data-version'), { timeout: DEPLOY_MS })
      .toBe('1');
    const statuses = Object.fromEntries((await deploysOf(agentId)).map((d) => [d.deployNumber, d.status]));
    expect(statuses).toEqual({ 1: 'superseded', 2: 'failed', 3: 'superseded', 4: 'live' });
    // the rollback changed the version only: the callers' caps are the live deploy's
    expect((await deploysOf(agentId))[0]).toMatchObject({
      version: 1,
      maxConcurrentCalls: 3,
      dailyCallCap: 500,
      maxCallDurationMs: 120_000,
    });

    // the live deploy's settings changed from the form: the next calls have them
    await page.fill('#set-max-concurrent', '5');
    await page.click('#deploy-apply');
    await expect.poll(async () => (await deploysOf(agentId))[0]!.maxConcurrentCalls).toBe(5);
    await expect.poll(() => page.locator('#deploy-live .live-settings').textContent()).toMatch(/ 5 at once/);

    // an origin that is not one (no scheme): the server's 400 says which field, and the page says it
    await page.fill('#key-origins', 'shop.example.com');
    await page.click('#key-form button[type="submit"]');
    await expect
      .poll(() => page.locator('#status').textContent())
      .toMatch(/^Creating the key failed — VALIDATION_FAILED: .*allowedOrigins/);
    // a publishable key: shown once, in the snippet too; listed by its prefix; revoked
    await page.fill('#key-origins', SHOP);
    await page.fill('#key-label', 'Shop');
    await page.click('#key-form button[type="submit"]');
    await page.locator('#new-key:visible').waitFor();
    const key = (await page.locator('#new-key code').textContent())!;
    expect(key).toMatch(/^pk_/);
    await page.click('#widget-box summary');
    expect(await page.locator('#widget-snippet').textContent()).toBe(
      `<script src="${stack.baseUrl}/live/widget.js" data-agent="${first.subdomain}" data-key="${key}" defer></script>`,
    );
    const listed = page.locator('#keys-list li[data-key-id]');
    await expect.poll(() => listed.count()).toBe(1);
    expect(await listed.textContent()).toMatch(new RegExp(`^pk_[\\w-]+… Shop · ${SHOP} Revoke$`));
    expect(key.startsWith((await listed.locator('code').textContent())!.replace('…', ''))).toBe(true);
    await listed.locator('button.revoke').click();
    await expect.poll(() => listed.getAttribute('data-revoked')).toBe('true');
    expect(await listed.textContent()).toMatch(/ · revoked /);
    expect(await listed.locator('button').count()).toBe(0);
    // a revoked key leaves the snippet (a page given it could not call)
    expect(await page.locator('#widget-snippet').textContent()).toContain('data-key="<publishable key>"');
    expect(await page.locator('#new-key').isHidden()).toBe(true);
    await page.screenshot({ path: '/tmp/console-deploy.png', fullPage: true });

    // a public call of the live version (version 1, on the stubs): hung up after the greeting
    const res = await fetch(`${pageUrl}/calls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ audio: { sampleRate: 16000, frameMs: 20 } }),
    });
    const started = (await res.json()) as { callId: string; audioPath: string };
    expect(res.status, JSON.stringify(started)).toBe(201);
    const client = new VoiceClient({ url: stack.baseUrl.replace(/^http/, 'ws') + started.audioPath });
    await client.ready;
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    client.close();
    await client.closed;
    await expect
      .poll(
        async () =>
          (await http.get<CallSummary>(`/api/agents/${agentId}/calls/${started.callId}`)).body.status,
        {
          timeout: 15_000,
        },
      )
      .toBe('ended');

    // the Calls panel: the call, filtered; opened, its transcript
    await page.click('#calls-refresh');
    const call = page.locator(`#calls button[data-call-id="${started.callId}"]`);
    await call.waitFor();
    expect(await call.getAttribute('data-channel')).toBe('web');
    expect(await call.locator('.what').textContent()).toMatch(/^v1 · #4 · \d+\.\d s · caller hung up/);
    await page.selectOption('#calls-reason', 'busy');
    await expect.poll(() => page.locator('#calls').textContent()).toBe('No calls.');
    await page.selectOption('#calls-reason', 'caller_hung_up');
    await call.waitFor();
    await page.selectOption('#calls-deploy', (await deploysOf(agentId))[0]!.id);
    await call.waitFor();
    await page.selectOption('#calls-deploy', first.id);
    await expect.poll(() => page.locator('#calls').textContent()).toBe('No calls.');
    await page.selectOption('#calls-deploy', '');
    await page.selectOption('#calls-channel', 'web');
    await page.selectOption('#calls-since', { label: 'last hour' });
    await call.click();
    await expect.poll(() => call.getAttribute('aria-current')).toBe('true');
    await expect
      .poll(() => page.locator('#log li.agent').allTextContents())
      .toEqual(['Hello, how can I help?']);
    // its recording beside it (hung up after the greeting: the agent's channel has it)
    await page.locator('#recording:visible').waitFor();
    expect(await page.locator('#recording').getAttribute('src')).toBe(
      `/api/agents/${agentId}/calls/${started.callId}/recording`,
    );
    expect(await page.locator('#conv-info').textContent()).toMatch(/^· call [\w-]{8}… · version 1$/);
    expect(await page.locator('#status').textContent()).toBe(`Replaying call ${started.callId}`);
    // a call is production data: no replay case is made of it
    expect(await page.locator('#add-case').isDisabled()).toBe(true);
    await page.screenshot({ path: '/tmp/console-calls.png', fullPage: true });

    // the stored key never reached the page
    expect(await page.content()).not.toContain(STORED_KEY);
    // what the browser logged: the refused origin's 400, nothing else
    expect(refused).toEqual([`400 ${stack.baseUrl}/api/agents/${agentId}/public-keys`]);
    await closeLoggingOnly(page, problems, refused);
  }, 180_000);

  it("a call's analysis and its filters, a re-run, the analysis settings (a refusal shown), two deploys' stats side by side", async () => {
    const agentId = (await http.post('/api/agents', { name: 'Analysed desk', flow: stubFlow() })).body
      .id as string;
    const { page, problems, refused } = await consoleOf(agentId);

    // the settings: off until set; two criteria of one name are refused, the issue said at its box
    await expect.poll(() => page.locator('#analysis-summary').isChecked()).toBe(true);
    expect(await page.locator('#analysis-enabled').isChecked()).toBe(false);
    await page.check('#analysis-enabled');
    await page.fill(
      '#analysis-criteria',
      'booked: The caller got the appointment they asked for.\nbooked: twice',
    );
    await page.fill(
      '#analysis-fields',
      'wants_booking (boolean): whether they want one\ntopic (enum booking|other): what it was about',
    );
    await page.click('#analysis-form button[type="submit"]');
    await expect
      .poll(() => page.locator('#analysis-error').textContent())
      .toBe('Criteria: criterion names must be unique');
    expect((await http.get(`/api/agents/${agentId}/analysis`)).body).toMatchObject({ enabled: false });
    // a field of a type there is not: said at its line
    await page.fill('#analysis-criteria', 'booked: The caller got the appointment they asked for.');
    await page.fill('#analysis-fields', 'wants_booking (boolean): whether they want one\nwhen (date)');
    await page.click('#analysis-form button[type="submit"]');
    await expect
      .poll(() => page.locator('#analysis-error').textContent())
      .toMatch(/^Data fields, line 2 \(type\): /);
    // corrected: saved as the page shows it
    await page.fill(
      '#analysis-fields',
      'wants_booking (boolean): whether they want one\ntopic (enum booking|other): what it was about',
    );
    await page.click('#analysis-form button[type="submit"]');
    await expect
      .poll(() => page.locator('#status').textContent())
      .toBe('Analysis settings saved: calls ending from now on are analysed with them');
    expect(await page.locator('#analysis-error').isHidden()).toBe(true);
    expect((await http.get(`/api/agents/${agentId}/analysis`)).body).toEqual({
      enabled: true,
      summary: true,
      criteria: [{ name: 'booked', description: 'The caller got the appointment they asked for.' }],
      dataFields: [
        { name: 'wants_booking', type: 'boolean', description: 'whether they want one' },
        { name: 'topic', type: 'enum', options: ['booking', 'other'], description: 'what it was about' },
      ],
      model: null,
    });

    // two deploys of the version, each with calls held over the bus as the playground holds them
    // deployed from the page, as a builder does (its Deploy panel lists them, stats and all)
    const liveDeploy = async () => {
      await deployInPage(page, 1);
      const d = (await deploysOf(agentId))[0]!;
      expect(d.status).toBe('live');
      return d;
    };
    const ask = { timeoutMs: REQUEST_TIMEOUT_MS, requestId: 'test' };
    const busCall = async (subdomain: string, lines: string[]) =>
      (await holdBusCall(bus, { subdomain }, () => spoken(lines))).callId;
    const bookingCall = ['Hello, how can I help?', 'I would like an appointment on Monday', 'Booked.'];
    const askingCall = ['Hello, how can I help?', 'When do you open?', 'At nine.'];
    const first = await liveDeploy();
    const booked1 = await busCall(first.subdomain, bookingCall);
    const failing = await busCall(first.subdomain, askingCall);
    const second = await liveDeploy();
    const booked2 = await busCall(second.subdomain, bookingCall);
    const short = await busCall(second.subdomain, ['Hello, how can I help?']);
    // the analyses arrive after the calls end (a work queue): the list shows each one's result once it has it
    const item = (id: string) => page.locator(`#calls button[data-call-id="${id}"]`);
    const results = () =>
      page.locator('#calls button').evaluateAll((bs) => bs.map((b) => b.getAttribute('data-result')));
    await expect
      .poll(
        async () => {
          await page.click('#calls-refresh');
          return results();
        },
        { timeout: 30_000, interval: 1000 },
      )
      .toEqual(['too short to judge', 'succeeded', 'failed', 'succeeded']);
    expect(await item(failing).locator('.what').textContent()).toMatch(
      /^v1 · #1 · \d+\.\d s · caller hung up · failed$/,
    );

    // the filters: on success, and on a criterion's verdict (the settings' criteria)
    const listed = () =>
      page.locator('#calls button').evaluateAll((bs) => bs.map((b) => b.getAttribute('data-call-id')));
    await page.selectOption('#calls-success', 'true');
    await expect.poll(listed).toEqual([booked2, booked1]);
    await page.selectOption('#calls-success', 'false');
    await expect.poll(listed).toEqual([failing]);
    await page.selectOption('#calls-success', '');
    await page.selectOption('#calls-criterion', 'booked:passed');
    await expect.poll(listed).toEqual([booked2, booked1]);
    await page.selectOption('#calls-criterion', '');
    await expect.poll(listed).toEqual([short, booked2, failing, booked1]);

    // a failed call opened: its summary, the criterion's verdict with its reason, the data, the model
    await item(failing).click();
    const analysis = page.locator('#call-analysis');
    await expect.poll(() => analysis.getAttribute('data-call-id')).toBe(failing);
    expect(await analysis.locator('.analysis-result').textContent()).toBe('Failed');
    expect(await analysis.locator('.analysis-summary').textContent()).toBe('The caller asked.');
    expect(await analysis.locator('.analysis-criteria li').allTextContents()).toEqual([
      'failed booked — no appointment was made',
    ]);
    expect(await analysis.locator('.analysis-data').innerText()).toMatch(
      /^wants_booking\s+false\s+topic\s+other$/,
    );
    expect(await analysis.locator('.analysis-model').textContent()).toMatch(/^by openai \S+ · /);
    // beside its transcript
    await expect.poll(() => page.locator('#log li.user').allTextContents()).toEqual(['When do you open?']);
    await item(short).click();
    await expect.poll(() => analysis.getAttribute('data-call-id')).toBe(short);
    expect(await analysis.locator('.analysis-result').textContent()).toBe(
      'Too short to judge: the caller never spoke, or barely.',
    );

    // two deploys side by side: each one's figures, and the second's against the first
    await page.click('#stats-box summary');
    await page.selectOption('#stats-a', first.id);
    await page.selectOption('#stats-b', second.id);
    await page.click('#stats-show');
    const row = (key: string) => page.locator(`#stats-table tr[data-row="${key}"] td`).allTextContents();
    await expect.poll(() => row('calls')).toEqual(['2', '2', '±0']);
    // the first: one passed, one failed; the second: one passed, one too short (judged neither)
    expect(await row('successRate')).toEqual(['50 %', '100 %', '+50 pts']);
    expect(await page.locator('#stats-table tr[data-row="successRate"] td.diff').getAttribute('class')).toBe(
      'diff better',
    );
    expect(await row('analysed')).toEqual(['2', '1', '−1']);
    expect(await row('ended-caller_hung_up')).toEqual(['2', '2', '±0']);
    expect(await page.locator('#stats-table thead th').allTextContents()).toEqual([
      '',
      `#${first.deployNumber} · v1`,
      `#${second.deployNumber} · v1`,
      'difference',
    ]);
    // one deploy's alone, from its row in the list
    await page.locator(`#deploys li[data-deploy-id="${first.id}"] button.stats`).click();
    await expect.poll(() => page.locator('#stats-table thead th').count()).toBe(2);
    expect(await row('failed')).toEqual(['1']);
    await page.screenshot({ path: '/tmp/console-deploy-stats.png', fullPage: true });

    // a criterion more: a re-run of a booked call follows it (never shown: unknown, so not decided)
    await page.fill(
      '#analysis-criteria',
      'booked: The caller got the appointment they asked for.\npolite: The agent thanked the caller.',
    );
    await page.click('#analysis-form button[type="submit"]');
    await expect.poll(() => page.locator('#calls-criterion option').count()).toBe(7);
    await item(booked2).click();
    await expect.poll(() => analysis.locator('.analysis-result').textContent()).toBe('Succeeded');
    await page.click('#call-rerun');
    await expect
      .poll(() => analysis.locator('.analysis-criteria li').allTextContents(), { timeout: 30_000 })
      .toEqual(['passed booked — the caller asked for an appointment', 'unknown polite — not shown']);
    expect(await analysis.locator('.analysis-result').textContent()).toBe('Not decided');
    expect(await analysis.locator('.analysis-summary').textContent()).toBe('The caller booked.');
    await expect.poll(() => page.locator('#status').textContent()).toBe(`Call ${booked2}: analysed again`);
    await page.screenshot({ path: '/tmp/console-analysis.png', fullPage: true });

    // the analyst's own model, from the form, as the API keeps it; emptied again: the agent's model
    const analysisOf = async () =>
      (await http.get(`/api/agents/${agentId}/analysis`)).body as { model: unknown };
    await page.fill('#analysis-provider', 'openai');
    await page.fill('#analysis-model', 'gpt-4o-mini');
    await page.click('#analysis-form button[type="submit"]');
    await expect
      .poll(async () => (await analysisOf()).model)
      .toEqual({ provider: 'openai', model: 'gpt-4o-mini' });
    await page.fill('#analysis-provider', '');
    await page.fill('#analysis-model', '');
    await page.click('#analysis-form button[type="submit"]');
    await expect.poll(async () => (await analysisOf()).model).toBeNull();

    // a call going on: its analysis comes after it ends, and it cannot be re-run yet
    const ongoing = await bus.request(
      Subjects.callsAdmit,
      { subdomain: second.subdomain, channel: 'web', caller: {}, instanceId: 'pg-test' },
      ask,
    );
    await page.click('#calls-refresh');
    await item(ongoing.callId).click();
    await expect.poll(() => analysis.getAttribute('data-call-id')).toBe(ongoing.callId);
    expect(await analysis.locator('.analysis-result').textContent()).toBe(
      'In progress: analysed after it ends.',
    );
    expect(await page.locator('#call-rerun').isHidden()).toBe(true);
    expect(await item(ongoing.callId).locator('.what').textContent()).toMatch(/ · in progress$/);
    await bus.request(
      Subjects.callsEnd,
      { agentId, callId: ongoing.callId, endedAt: Date.now(), endedReason: 'caller_hung_up' },
      ask,
    );

    // what the browser logged: the refused settings' 400, nothing else
    expect(refused).toEqual(Array(2).fill(`400 ${stack.baseUrl}/api/agents/${agentId}/analysis`));
    await closeLoggingOnly(page, problems, refused);
  }, 150_000);

  it('starts a canary beside the live deploy from the form, shows its share, promotes it; a rolled-back one with its reason and figures', async () => {
    const agentId = (await http.post('/api/agents', { name: 'Canary desk', flow: stubFlow() })).body
      .id as string;
    expect((await http.patch(`/api/agents/${agentId}`, { flow: stubFlow() })).body.version).toBe(2);
    const { page, problems } = await consoleOf(agentId);
    await deployInPage(page, 1);

    // version 2 for a quarter of new calls: a canary beside version 1, which stays live
    await page.fill('#deploy-traffic', '25');
    // promoted by itself after an hour unless promoted by hand first (below): the form's seconds, the API's ms
    await page.fill('#deploy-window', '3600');
    await page.selectOption('#deploy-version', '2');
    await page.click('#deploy');
    const canary = page.locator('#deploys li[data-deploy-id]').first();
    await expect.poll(() => canary.getAttribute('data-status'), { timeout: DEPLOY_MS }).toBe('canary');
    expect(await canary.locator('.verdict').textContent()).toBe('canary');
    expect(await canary.locator('.traffic').textContent()).toBe(
      ' · 25 % of new calls · promoted after 3600 s',
    );
    expect(await page.locator('#deploy-live').getAttribute('data-version')).toBe('1');
    const [started] = await deploysOf(agentId);
    expect(started).toMatchObject({
      status: 'canary',
      version: 2,
      trafficPercent: 25,
      canaryWindowMs: 3_600_000,
    });

    // promoted from its row: the live deploy for every new call, the previous one superseded
    await canary.locator('button.promote').click();
    await expect.poll(() => page.locator('#deploy-live').getAttribute('data-version')).toBe('2');
    expect(await canary.getAttribute('data-status')).toBe('live');
    expect(await canary.locator('button.promote').count()).toBe(0);
    expect(await page.locator('#deploys li[data-deploy-id]').nth(1).getAttribute('data-status')).toBe(
      'superseded',
    );
    expect(await page.locator('#status').textContent()).toBe(
      'Deploy #2 of v2: promoted, live for every new call',
    );
    expect((await deploysOf(agentId))[0]).toMatchObject({ status: 'live', promoted: { by: 'hand' } });

    // a canary of version 1 whose calls fail the criterion while the live one's pass: rolled back by the judge
    // over the bus flow tests/integration/live/canary.test.ts uses, and shown with its reason and figures
    const criteria = [{ name: 'booked', description: 'The caller got the appointment they asked for.' }];
    const settings = { enabled: true, summary: false, criteria, dataFields: [], model: null };
    expect((await http.put(`/api/agents/${agentId}/analysis`, settings)).status).toBe(200);
    const second = (await http.post(`/api/agents/${agentId}/deploys`, { version: 1, trafficPercent: 50 }))
      .body as DeployRecord;
    await expect
      .poll(async () => (await deploysOf(agentId)).find((d) => d.id === second.id)?.status, {
        timeout: DEPLOY_MS,
      })
      .toBe('canary');
    const sides = { canary: 0, live: 0 };
    // each call is drawn (no caller key): called until each side has the minimum, bounded
    for (let i = 0; i < 60 && (sides.canary < 2 || sides.live < 2); i++) {
      await holdBusCall(bus, { subdomain: started!.subdomain }, ({ deployId }) => {
        const onCanary = deployId === second.id;
        sides[onCanary ? 'canary' : 'live'] += 1;
        return spoken(['Hello, how can I help?', onCanary ? 'When do you open?' : 'An appointment, please']);
      });
    }
    await expect
      .poll(async () => (await deploysOf(agentId)).find((d) => d.id === second.id)?.status, {
        timeout: 30_000,
      })
      .toBe('rolled_back');
    await page.reload();
    await page.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
    await page.selectOption('#agent', agentId);
    const rolled = page.locator(`#deploys li[data-deploy-id="${second.id}"]`);
    await expect.poll(() => rolled.getAttribute('data-status')).toBe('rolled_back');
    expect(await rolled.locator('.verdict').textContent()).toBe('rolled back');
    expect(await rolled.locator('.rollback-reason').textContent()).toMatch(
      /^Rolled back \(success rate\): \S/,
    );
    expect(await rolled.locator('.rollback-side[data-side="canary"]').textContent()).toMatch(
      /^canary: 0 % success \(0\/\d+ judged\) · \d+ timed$/,
    );
    expect(await rolled.locator('.rollback-side[data-side="live"]').textContent()).toMatch(
      /^live: 100 % success \((\d+)\/\1 judged\) · \d+ timed$/,
    );
    expect(await rolled.locator('button.promote').count()).toBe(0);
    await page.screenshot({ path: '/tmp/console-canary.png', fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  }, 120_000);
});
