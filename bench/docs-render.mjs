#!/usr/bin/env node
// How soon the API reference page shows the API (issue 36): the agents and sessions services and a gateway
// (this checkout's build) on their own nats-server and redis-server, and Debian's Chromium loading `/docs/`.
// Each run is a new browser context (nothing cached) that visits the page `--visits` times. Prints, in ms
// from the navigation's start, p50 and max over the runs, for the first visit and the last: the first
// contentful paint, when an operation of the API (the agents list, by its summary) is first laid out inside
// the window, and when the page's last long task (50 ms and more: a click waits for it) ended; then what the
// loads complained about (console errors, CSP violations) and fetched from other origins (the page must work
// offline). `--cpu-slowdown 4` is DevTools' CPU throttling: a slower or busier machine than this one.
// `--url` measures a server that is already running instead (another viewer, another checkout), `--path`
// and `--text` another page and another text to wait for.
// Usage: npm run build && node bench/docs-render.mjs [--runs 10] [--visits 3] [--cpu-slowdown 4]
//   [--url http://127.0.0.1:3000] [--path /docs/] [--text 'List active agents']

import { launchChromium, startLocalNats, startLocalRedis } from '@vab/testkit';
import { option, startCore } from './processes.mjs';
import { root } from './lib/figures.mjs';

const RUNS = option('runs', 10);
const PATH = option('path', '/docs/');
// the summary of GET /api/agents: the first operation of the first tag
const TEXT = option('text', 'List active agents');
const SLOWDOWN = option('cpu-slowdown', 1);
const TIMEOUT_MS = 30_000 * SLOWDOWN;
const QUIET_MS = 2000;
// the same page again in the same browser context: from the HTTP cache, and from the third visit on with
// the scripts' compiled code cached by V8 (what a builder reopening the page gets)
const VISITS = option('visits', 3);
const ordinal = (n) => `${n}${n === 2 ? 'nd' : n === 3 ? 'rd' : 'th'}`;

let base = option('url', '');
if (!base) {
  const nats = await startLocalNats();
  const redis = await startLocalRedis();
  const core = await startCore(root, { NATS_URL: nats.url, REDIS_URL: redis.url });
  base = core.url;
}

// Installed before the page's own scripts (the driver's, so the page's CSP does not apply): the first paint
// with content, and on every frame whether an element holding TEXT is laid out inside the window. The text
// is looked for with XPath (native: a frame's check costs the page little) in the document and in the shadow
// roots of the top-level web components a viewer may render into.
const probe = `(() => {
  const TEXT = ${JSON.stringify(TEXT)};
  const found = { fcp: undefined, operation: undefined, busyUntil: 0, lastTaskSeen: 0 };
  window.__docsRender = found;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.name === 'first-contentful-paint') found.fcp = e.startTime;
  }).observe({ type: 'paint', buffered: true });
  // tasks of 50 ms and more: until the last one ends, a click or a scroll may wait
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) found.busyUntil = Math.max(found.busyUntil, e.startTime + e.duration);
    found.lastTaskSeen = performance.now();
  }).observe({ type: 'longtask', buffered: true });
  document.addEventListener('securitypolicyviolation', (e) =>
    console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));
  // a text node holding TEXT: its element, if laid out inside the window
  const xpath = './/text()[contains(., ' + JSON.stringify(TEXT) + ')]';
  const inWindow = (el) => {
    if (!el || (el.checkVisibility && !el.checkVisibility())) return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < innerHeight && r.right > 0 && r.left < innerWidth;
  };
  const shown = (root) => {
    if (root === document.body) {
      const hits = document.evaluate(xpath, root, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE, null);
      for (let i = 0; i < hits.snapshotLength; i++) if (inWindow(hits.snapshotItem(i).parentElement)) return true;
      return false;
    }
    // XPath does not enter a shadow tree: its text nodes one by one
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode())
      if (n.data.includes(TEXT) && inWindow(n.parentElement)) return true;
    return false;
  };
  const check = () => {
    if (!document.body) return requestAnimationFrame(check);
    const roots = [document.body];
    for (const el of document.body.children) if (el.shadowRoot) roots.push(el.shadowRoot);
    for (const el of document.body.querySelectorAll(':scope > * > *')) if (el.shadowRoot) roots.push(el.shadowRoot);
    if (roots.some(shown)) found.operation = performance.now();
    else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})();`;

const browser = await launchChromium();
/** Each visit's figures: `[visit][run]`. */
const figures = Array.from({ length: VISITS }, () => ({ fcp: [], operation: [], busy: [] }));
const problems = new Map();
const offsite = new Set();

/** One load of the page in `page`: its figures once no long task has run for QUIET_MS. */
async function visit(page) {
  await page.goto(`${base}${PATH}`);
  await page.waitForFunction(() => globalThis.__docsRender?.operation !== undefined, null, {
    timeout: TIMEOUT_MS,
  });
  await page.waitForFunction(
    (quietMs) =>
      performance.now() - Math.max(globalThis.__docsRender.lastTaskSeen, globalThis.__docsRender.operation) >
      quietMs,
    QUIET_MS,
    { timeout: TIMEOUT_MS, polling: 100 },
  );
  const found = await page.evaluate(() => globalThis.__docsRender);
  return {
    fcp: found.fcp ?? NaN,
    operation: found.operation,
    busy: Math.max(found.busyUntil, found.operation),
  };
}

try {
  for (let i = 0; i < RUNS; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') problems.set(m.text(), (problems.get(m.text()) ?? 0) + 1);
    });
    page.on('pageerror', (err) => problems.set(`page error: ${err.message}`, 1));
    page.on('request', (req) => {
      if (!/^(data|blob):/.test(req.url()) && !req.url().startsWith(base)) offsite.add(req.url());
    });
    await page.addInitScript({ content: probe });
    if (SLOWDOWN !== 1) {
      const cdp = await context.newCDPSession(page);
      await cdp.send('Emulation.setCPUThrottlingRate', { rate: SLOWDOWN });
    }
    for (const f of figures) {
      const v = await visit(page);
      for (const k of Object.keys(f)) f[k].push(v[k]);
    }
    await context.close();
  }
} finally {
  await browser.close();
}

const sorted = (xs) => [...xs].sort((a, b) => a - b);
const p50 = (xs) => sorted(xs)[Math.floor((xs.length - 1) / 2)];
const max = (xs) => sorted(xs).at(-1);
const ms = (xs) => `${Math.round(p50(xs))} / ${Math.round(max(xs))}`;
console.log(
  `${base}${PATH}: ${RUNS} runs of ${VISITS} visit(s), each run in a new browser context, 1280×800` +
    (SLOWDOWN !== 1 ? `, CPU slowed down ${SLOWDOWN}×` : ''),
);
console.log('ms from the start of the navigation, p50 / max');
console.log(`| visit | first contentful paint | "${TEXT}" in the window | main thread busy until |`);
console.log('|---|---|---|---|');
figures.forEach((f, i) => {
  if (i === 0 || i === VISITS - 1)
    console.log(
      `| ${i === 0 ? '1st (nothing cached)' : `${ordinal(i + 1)} (cached)`} | ${ms(f.fcp)} | ${ms(f.operation)} | ${ms(f.busy)} |`,
    );
});
console.log(
  `console errors: ${problems.size === 0 ? 'none' : [...problems].map(([t, n]) => `${n}× ${t}`).join('; ')}`,
);
console.log(`requests to other origins: ${offsite.size === 0 ? 'none' : [...offsite].join(', ')}`);
// the servers and services started here stop with this process (stopOnExit)
process.exit(0);
