import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

/** The page's files (src/ and dist/ both sit one level under the service, next to console/). */
const CONSOLE_DIR = fileURLToPath(new URL('../console/', import.meta.url));
/** eventsource-parser's browser modules, which the page's API module reads a streamed turn with. */
const SSE_PARSER_DIR = join(
  dirname(createRequire(import.meta.url).resolve('eventsource-parser/package.json')),
  'dist',
);

function consoleHeaders(reply: FastifyReply, path: string): void {
  // JavaScript's type is text/javascript (RFC 9239); send's table still says application/javascript
  if (path.endsWith('.js')) reply.header('content-type', 'text/javascript; charset=utf-8');
  reply.header('content-security-policy', CONSOLE_CSP);
  // a new deploy's page must not run with the old script
  reply.header('cache-control', 'no-cache');
}

/**
 * The console (a page to build, run and test an agent): @fastify/static serves its folder, each file found
 * at start (a new module of the page needs no route), index.html at the prefix; the checker's files (types,
 * tsconfig) are not served. The page is open like /docs; the API calls it makes carry the token.
 */
export async function registerConsole(app: FastifyInstance): Promise<void> {
  const common = {
    decorateReply: false,
    wildcard: false,
    cacheControl: false,
    setHeaders: consoleHeaders,
  } as const;
  await app.register(fastifyStatic, {
    ...common,
    root: CONSOLE_DIR,
    prefix: `${CONSOLE_PREFIX}/`,
    // `/console` as well as `/console/`
    redirect: true,
    globIgnore: ['**/*.d.ts', '**/tsconfig.json'],
  });
  await app.register(fastifyStatic, {
    ...common,
    root: SSE_PARSER_DIR,
    prefix: `${CONSOLE_PREFIX}/lib/vendor/eventsource-parser/`,
    globIgnore: ['**/*.cjs', '**/*.d.*', '**/*.map', '**/*.html'],
  });
}
