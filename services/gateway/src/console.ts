import type { FastifyInstance } from 'fastify';
import { readdirSync, readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { CONSOLE_PREFIX } from './security.js';

/**
 * The console's own policy: nothing from elsewhere, no inline script or style; it only calls this origin's
 * API (fetch, EventSource and the voice WebSocket are connect-src; its AudioWorklets are scripts; a session's
 * recording is media).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "media-src 'self'",
  "img-src 'self' data:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/** What each of the page's files is served as, by extension. */
const TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/**
 * The page's files (src/ and dist/ both sit one level under the service, next to console/): index.html at
 * the prefix, and every module and style sheet beside it, so a new module of the page needs no route.
 */
function filesOf(dir: URL): { url: string; file: string; type: string }[] {
  const assets = readdirSync(dir)
    .filter((f) => Object.hasOwn(TYPES, extname(f)))
    .sort()
    .map((file) => ({ url: `${CONSOLE_PREFIX}/${file}`, file, type: TYPES[extname(file)]! }));
  return [{ url: CONSOLE_PREFIX, file: 'index.html', type: 'text/html; charset=utf-8' }, ...assets];
}

/**
 * The console (a page to build, run and test an agent): static files read once at start and
 * served as they are. The page is open like /docs; the API calls it makes carry the token.
 */
export function registerConsole(app: FastifyInstance): void {
  const dir = new URL('../console/', import.meta.url);
  for (const f of filesOf(dir)) {
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
