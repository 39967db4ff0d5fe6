import type { Browser, Page } from 'playwright-core';

/**
 * A page that keeps everything it complains about: console errors and warnings, uncaught errors, CSP
 * violations. `init`: more script run in every document before the page's own (injected by the driver, so the
 * page's own CSP does not apply to it).
 */
export async function watchedPage(browser: Browser, init = ''): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  await page.addInitScript({
    content: `document.addEventListener('securitypolicyviolation', (e) =>
      console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));
      ${init}`,
  });
  return { page, problems };
}
