import type { FastifyInstance } from 'fastify';
import { readFileSync } from 'node:fs';
import { CONSOLE_PREFIX } from './security.js';

/**
 * The console's own policy: nothing from elsewhere, no inline script or style; it only calls this origin's
 * API (fetch and EventSource are connect-src).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/** The page's files (src/ and dist/ both sit one level under the service, next to console/). */
const FILES = [
  { url: CONSOLE_PREFIX, file: 'index.html', type: 'text/html; charset=utf-8' },
  { url: `${CONSOLE_PREFIX}/console.js`, file: 'console.js', type: 'text/javascript; charset=utf-8' },
  { url: `${CONSOLE_PREFIX}/console.css`, file: 'console.css', type: 'text/css; charset=utf-8' },
] as const;

/**
 * The console (a page to run an agent and watch its events): three static files read once at start and
 * served as they are. The page is open like /docs; the API calls it makes carry the token.
 */
export function registerConsole(app: FastifyInstance): void {
  const dir = new URL('../console/', import.meta.url);
  for (const f of FILES) {
    const body = readFileSync(new URL(f.file, dir));
    app.get(f.url, { schema: { hide: true } }, (_req, reply) =>
      reply
        .header('content-security-policy', CONSOLE_CSP)
        // a new deploy's page must not run with the old script
        .header('cache-control', 'no-cache')
        .type(f.type)
        .send(body),
    );
  }
  app.get(`${CONSOLE_PREFIX}/`, { schema: { hide: true } }, (_req, reply) => reply.redirect(CONSOLE_PREFIX));
}
