import { launchChromium, listenOnLoopback } from '@vab/testkit';
import { createServer, request, type Server } from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchedPage } from '../../helpers/pages.js';
import { startStack, type Stack } from '../../helpers/stack.js';

/**
 * The public talk page and the widget as they are served (docs/api.md, "The talk page and the widget"): open
 * while the API needs a token, each with the headers its users need (the page's strict CSP; the widget's files
 * readable from any site), the page at `<subdomain>.<LIVE_DOMAIN>` too, and in Chromium: the page and a
 * widget embedded on another origin under the CSP the docs give site owners load without a violation and say
 * in words when there is no live agent to call.
 */

const TOKEN = 'live-page-token-0123456789';
const LIVE_DOMAIN = 'live.example.test';
const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

let stack: Stack;
let site: Server;
let siteOrigin = '';
let browser: Browser;

/** The CSP docs/api.md gives a site that embeds the widget, for a gateway at `gateway` (an http(s) origin). */
const siteCsp = (gateway: string) => {
  const socket = gateway.replace(/^http/, 'ws');
  return [
    "default-src 'self'",
    `script-src 'self' ${gateway}`,
    `style-src 'self' ${gateway}`,
    `connect-src 'self' ${gateway} ${socket}`,
  ].join('; ');
};

/** A site on another origin: its page embeds the widget as docs/api.md says, under the CSP it gives. */
function sitePage(gateway: string, subdomain: string, key: string): string {
  return `<!doctype html><html><head><title>A clinic's site</title></head><body>
<h1>Welcome</h1>
<script src="${gateway}/live/widget.js" data-agent="${subdomain}" data-key="${key}" defer></script>
</body></html>`;
}

beforeAll(async () => {
  stack = await startStack({ security: { apiTokens: [TOKEN] }, gateway: { LIVE_DOMAIN } });
  site = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://site');
    res
      .writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'content-security-policy': siteCsp(stack.baseUrl),
      })
      .end(
        sitePage(stack.baseUrl, url.searchParams.get('agent') ?? 'clinic', url.searchParams.get('key') ?? ''),
      );
  });
  siteOrigin = `http://127.0.0.1:${await listenOnLoopback(site)}`;
  browser = await launchChromium({
    args: ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
  site?.closeAllConnections();
  await new Promise<void>((r) => (site ? site.close(() => r()) : r()));
});

/** An element's computed style (in the page: its window's getComputedStyle). */
type Styled = { getComputedStyle(e: unknown): Record<string, string> };
const styleOf = (locator: ReturnType<Page['locator']>, prop: string) =>
  locator.evaluate((e, p) => (globalThis as unknown as Styled).getComputedStyle(e)[p], prop);

/** A GET with a Host header of our choosing (fetch() cannot set one). */
function getWithHost(path: string, host: string): Promise<{ status: number; csp: string; body: string }> {
  const { port } = new URL(stack.baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, csp: String(res.headers['content-security-policy']), body }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the talk page and the widget, as served', () => {
  it('serves the page at /live/:subdomain with its strict CSP, with no token while the API needs one', async () => {
    expect((await fetch(`${stack.baseUrl}/api/agents`)).status).toBe(401);
    const res = await fetch(`${stack.baseUrl}/live/clinic`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toBe(PAGE_CSP);
    expect(res.headers.get('permissions-policy')).toMatch(/microphone=\(self\)/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await res.text();
    expect(html).toContain('<script type="module" src="/live/page.js">');
    // no inline script: every script of the page is a file
    expect(html.match(/<script\b[^>]*>/g)).toEqual(['<script type="module" src="/live/page.js">']);
    // a subdomain that is not a DNS label is no page
    expect((await fetch(`${stack.baseUrl}/live/Not_A_Label`)).status).toBe(400);
  });

  it("serves the widget's files to any site, and nothing else of its folder", async () => {
    for (const [file, type] of [
      ['widget.js', /^text\/javascript/],
      ['talk-ui.js', /^text\/javascript/],
      ['page.js', /^text\/javascript/],
      ['talk.css', /^text\/css/],
      ['voice/voice-call.js', /^text\/javascript/],
      ['voice/mic-worklet.js', /^text\/javascript/],
      ['voice/player-worklet.js', /^text\/javascript/],
    ] as const) {
      const res = await fetch(`${stack.baseUrl}/live/${file}`, { headers: { origin: siteOrigin } });
      expect(res.status, file).toBe(200);
      expect(res.headers.get('content-type'), file).toMatch(type);
      // a module and a worklet are fetched with CORS, a classic script without it (CORP must allow it)
      expect(res.headers.get('access-control-allow-origin'), file).toBe('*');
      expect(res.headers.get('cross-origin-resource-policy'), file).toBe('cross-origin');
    }
    // (a name with a dot is no subdomain either: 400 rather than a page)
    for (const file of ['index.html', 'tsconfig.json', 'voice/audio-worklet.d.ts', 'voice/nothing.js'])
      expect([400, 404], file).toContain((await fetch(`${stack.baseUrl}/live/${file}`)).status);
    // the console's Talk runs on the same voice client: its worklets are no longer the console's
    expect((await fetch(`${stack.baseUrl}/console/mic-worklet.js`)).status).toBe(404);
  });

  it('answers the page at the root of <subdomain>.<LIVE_DOMAIN>, and only there', async () => {
    const page = await getWithHost('/', `clinic.${LIVE_DOMAIN}`);
    expect(page.status).toBe(200);
    expect(page.csp).toBe(PAGE_CSP);
    expect(page.body).toContain('/live/page.js');
    expect((await getWithHost('/?from=ad', `clinic.${LIVE_DOMAIN}:443`)).status).toBe(200);
    // not one label under the domain, another domain, or another path: not the page
    for (const [path, host] of [
      ['/', `a.b.${LIVE_DOMAIN}`],
      ['/', LIVE_DOMAIN],
      ['/', 'clinic.example.test'],
      ['/other', `clinic.${LIVE_DOMAIN}`],
    ] as const)
      expect((await getWithHost(path, host)).body, `${host}${path}`).not.toContain('/live/page.js');
  });
});

describe('the talk page and the widget, in Chromium', () => {
  it('the page: its subdomain named, a call to no live agent says so in words, no CSP violation', async () => {
    const { page, problems } = await watchedPage(browser);
    await page.goto(`${stack.baseUrl}/live/nobody-here`);
    await expect.poll(() => page.title()).toBe('Talk to nobody-here');
    const talk = page.locator('section.vab-talk');
    await expect.poll(() => talk.getAttribute('data-state')).toBe('idle');
    await page.click('button.call');
    await expect.poll(() => talk.getAttribute('data-state')).toBe('error');
    expect(await page.locator('.status[role="alert"]').textContent()).toMatch(
      /^There is no live agent here: /,
    );
    expect(await page.locator('button.call').textContent()).toBe('Call again');
    // the browser's own log line for the failed call (a 404 on the network) is no problem of the page
    expect(problems.filter((p) => !/Failed to load resource: .* 404/.test(p))).toEqual([]);
    await page.close();
  });

  it('the widget: embedded on another origin under the documented CSP, its button in a shadow root', async () => {
    const { page, problems } = await watchedPage(browser);
    await page.goto(`${siteOrigin}/?agent=clinic&key=pk_test_unused`);
    // the host page's own styles stay out of the widget and the widget's out of the page
    const host = page.locator('div.vab-widget');
    await host.waitFor({ state: 'attached' });
    expect(await host.evaluate((h) => h.shadowRoot !== null && h.shadowRoot.mode === 'open')).toBe(true);
    const button = page.locator('div.vab-widget button.call');
    await expect.poll(() => button.textContent()).toBe('Start call');
    // its stylesheet came from the gateway and applies inside the shadow root only
    expect(await styleOf(button, 'borderRadius')).toBe('999px');
    expect(await styleOf(page.locator('body > h1'), 'fontFamily')).not.toMatch(/system-ui/);
    expect(problems).toEqual([]);
    await page.close();
  });
});
