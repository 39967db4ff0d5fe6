import { fullFlow, launchChromium, withNode } from '@vab/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clinicScript, startOpenAiStub } from '../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../helpers/stack.js';

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
const KEY = 'sk-test-console-0123456789';

let stack: Stack;
let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
let browser: Browser;

beforeAll(async () => {
  stub = await startOpenAiStub(clinicScript);
  stack = await startStack();
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
  await stub?.close();
});

/** Everything the page complains about: console errors and warnings, uncaught errors, CSP violations. */
async function watchedPage(): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  // injected by the driver, so the page's own CSP does not apply to it
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  return { page, problems };
}

describe('the console', () => {
  it('runs a text session: the reply streams in, the step is drawn, the turn is charted, and it replays', async () => {
    const http = api(stack.baseUrl);
    const flow = withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });
    const created = await http.post('/api/agents', { name: 'Console clinic', flow });
    expect(created.status).toBe(201);
    const agentId = created.body.id as string;

    const { page, problems } = await watchedPage();
    const turnAnswers: string[] = [];
    page.on('response', (res) => {
      if (res.url().endsWith('/turns')) turnAnswers.push(res.headers()['content-type'] ?? '');
    });
    await page.goto(`${stack.baseUrl}/console`);
    await page.locator(`#agent option[value="${agentId}"]`).waitFor({ state: 'attached' });
    await page.selectOption('#agent', agentId);
    await page.locator('#version option[value="latest"]').waitFor({ state: 'attached' });
    await page.click('summary');
    await page.fill('#keys', `openai=${KEY}`);
    await page.click('#start');

    const log = page.locator('#log');
    await expect
      .poll(() => log.locator('li.agent').allTextContents())
      .toEqual(['Hello, this is the clinic.']);
    await page.locator('#turn:enabled').waitFor();
    await page.fill('#turn', 'Hi');
    await page.press('#turn', 'Enter');
    await expect
      .poll(() => log.locator('li.agent').allTextContents())
      .toEqual(['Hello, this is the clinic.', 'ok: Hi']);
    // the reply came as the turn's own event stream, not as its JSON answer
    expect(turnAnswers).toEqual([expect.stringContaining('text/event-stream')]);
    await expect.poll(() => log.locator('li.user').allTextContents()).toEqual(['Hi']);
    await expect.poll(() => page.locator('#flow .node.current').getAttribute('data-node-id')).toBe('burst');
    expect(await page.locator('#flow .node.visited[data-node-id="start"]').count()).toBe(1);
    await expect.poll(() => page.locator('#chart rect.bar-turnMs').count()).toBeGreaterThanOrEqual(1);
    await expect.poll(() => page.locator('#chart rect.bar-llmTtftMs').count()).toBeGreaterThanOrEqual(1);
    await page.screenshot({ path: '/tmp/console.png' });

    await page.click('#end');
    await expect.poll(() => log.locator('li.event').last().textContent()).toMatch(/^Session ended/);
    expect(await page.locator('#turn').isDisabled()).toBe(true);

    // the past session, replayed from its events stream
    const sessions = await http.get(`/api/agents/${agentId}/test-sessions`);
    const sessionId = sessions.body[0].id as string;
    await page.click('#refresh');
    await page.click(`#sessions button[data-session-id="${sessionId}"]`);
    await expect.poll(() => log.locator('li.event').last().textContent()).toMatch(/^Session ended/);
    expect(await log.locator('li.agent').allTextContents()).toEqual(['Hello, this is the clinic.', 'ok: Hi']);
    expect(await log.locator('li.user').allTextContents()).toEqual(['Hi']);
    expect(await log.locator('li.event').first().textContent()).toMatch(/^Session started/);
    expect(await page.locator('#flow .node.current').getAttribute('data-node-id')).toBe('burst');
    expect(await page.locator('#chart rect.bar-turnMs').count()).toBeGreaterThanOrEqual(1);
    await page.screenshot({ path: '/tmp/console-replay.png' });

    expect(problems).toEqual([]);
    await page.close();
  });

  it('is served with its own strict CSP, open while the API needs a token', async () => {
    const locked = await startStack({ security: { apiTokens: ['console-test-token'] } });
    try {
      const page = await fetch(`${locked.baseUrl}/console`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      expect(page.headers.get('content-security-policy')).toBe(CSP);
      expect(page.headers.get('x-content-type-options')).toBe('nosniff');
      expect(await page.text()).toContain('<script type="module" src="/console/console.js">');
      for (const [file, type] of [
        ['console.js', /^text\/javascript/],
        ['console.css', /^text\/css/],
      ] as const) {
        const res = await fetch(`${locked.baseUrl}/console/${file}`);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(type);
        expect(res.headers.get('content-security-policy')).toBe(CSP);
      }
      expect((await fetch(`${locked.baseUrl}/console/nothing-here`)).status).toBe(404);
      expect((await fetch(`${locked.baseUrl}/api/agents`)).status).toBe(401);
    } finally {
      await locked.close();
    }
  });
});
