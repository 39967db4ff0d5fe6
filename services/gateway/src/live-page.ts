import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { BusClient } from '@vab/bus';
import { AppError, LIVE_PREFIX, LiveParams, Subjects } from '@vab/contracts';

/**
 * The talk page's policy: everything from this origin, nothing from elsewhere, no inline script or style. Its
 * calls (`POST /live/…/calls`, the voice WebSocket) are connect-src 'self'; its AudioWorklets are scripts.
 */
export const LIVE_PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/** The page may use the microphone (its own origin only); nothing else a page could ask for. */
const LIVE_PAGE_PERMISSIONS = 'microphone=(self), camera=(), geolocation=(), payment=()';

/** The page's files and the voice client (src/ and dist/ both sit one level under the service, next to live/). */
const LIVE_DIR = fileURLToPath(new URL('../live/', import.meta.url));

/**
 * The files other sites load (the widget's script, its module, styles and worklets): any origin may read
 * them (a module and a worklet are fetched with CORS; a classic script is fetched without it and CORP must
 * let it through). They are public code, the same for everyone, and carry no credential.
 */
function assetHeaders(reply: FastifyReply, path: string): void {
  // JavaScript's type is text/javascript (RFC 9239); send's table still says application/javascript
  if (path.endsWith('.js')) reply.header('content-type', 'text/javascript; charset=utf-8');
  reply.header('access-control-allow-origin', '*');
  reply.header('cross-origin-resource-policy', 'cross-origin');
  // a new deploy's page must not run with the old script
  reply.header('cache-control', 'no-cache');
}

/**
 * The public talk page and the widget (docs/api.md, "The talk page and the widget"): `GET /live/:subdomain`
 * answers the page (the same HTML for every subdomain: the page reads its own from its URL), the folder's
 * files are served under /live/ for the page and for other sites (widget.js). No token: /live is public,
 * rate limited per address like everything (security.ts). A page its builder turned off answers 404.
 */
export async function registerLivePage(
  app: FastifyInstance,
  deps: { bus: BusClient; timeoutMs: number },
): Promise<void> {
  const page = readFileSync(`${LIVE_DIR}index.html`);
  await app.register(fastifyStatic, {
    root: LIVE_DIR,
    prefix: `${LIVE_PREFIX}/`,
    decorateReply: false,
    wildcard: false,
    cacheControl: false,
    index: false,
    setHeaders: assetHeaders,
    // the page is its route's (below); the checker's files are not served
    globIgnore: ['**/*.d.ts', '**/tsconfig.json', '**/index.html'],
  });
  app.get(`${LIVE_PREFIX}/:subdomain`, { schema: { hide: true, params: LiveParams } }, async (req, reply) => {
    const { subdomain } = req.params as LiveParams;
    // the builder turned the page off (call settings `livePage: false`): it is not there
    const { page: on } = await deps.bus.request(
      Subjects.livePage,
      { subdomain },
      { timeoutMs: deps.timeoutMs, requestId: String(req.id) },
    );
    if (!on) throw new AppError('NOT_FOUND', 'no page here');
    return reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', LIVE_PAGE_CSP)
      .header('permissions-policy', LIVE_PAGE_PERMISSIONS)
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .send(page);
  });
}

/**
 * With a wildcard domain (`LIVE_DOMAIN=live.example.com`), `https://<subdomain>.live.example.com/` is the
 * talk page of that subdomain: Fastify's `rewriteUrl` turns its root into `/live/<subdomain>` before routing,
 * so the page's route, its headers and limits are the same. Every other path on such a host is left as it is
 * (the page's files and calls are under /live/ there too). A host that is not one label under the domain is
 * not rewritten.
 */
export function liveHostRewrite(
  liveDomain: string | undefined,
): ((req: IncomingMessage) => string) | undefined {
  if (!liveDomain) return undefined;
  const suffix = `.${liveDomain.toLowerCase()}`;
  return (req) => {
    const url = req.url ?? '/';
    if (url !== '/' && !url.startsWith('/?')) return url;
    const host = (req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
    if (!host.endsWith(suffix)) return url;
    const label = host.slice(0, -suffix.length);
    if (!LiveParams.shape.subdomain.safeParse(label).success) return url;
    return `${LIVE_PREFIX}/${label}${url.slice(1)}`;
  };
}
