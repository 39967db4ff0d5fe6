import { envInt, envParsed, loadConfig as load, MetricsEnv, RedisEnv } from '@vab/service-kit';
import { parseAllowList, type AllowEntry } from '@vab/egress';
import { isIP } from 'node:net';
import { z } from 'zod';

/** An empty variable counts as unset (compose passes `${X:-}` through as ''). */
const unsetIfEmpty = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (v === '' ? undefined : v), schema);

/** proxy-addr's names for address ranges (what Fastify's `trustProxy` takes besides addresses and CIDRs). */
const PROXY_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * TRUST_PROXY: the proxies in front whose `X-Forwarded-For` names the client (addresses, CIDR ranges or
 * proxy-addr's range names, comma-separated). Unset: none (the peer is the client).
 */
export function parseTrustProxy(text: string | undefined): string[] | undefined {
  const t = text?.trim();
  if (!t) return undefined;
  const entries = t.split(',').map((e) => e.trim());
  for (const entry of entries) {
    const [address = '', bits, more] = entry.split('/');
    const max = isIP(address) === 4 ? 32 : 128;
    const valid =
      PROXY_RANGES.has(entry) ||
      (isIP(address) !== 0 &&
        more === undefined &&
        (bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= max)));
    if (!valid)
      throw new Error(`"${entry}" is not an address, a CIDR range, or loopback/linklocal/uniquelocal`);
  }
  return entries;
}

export type TelephonyConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv) {
  return load(
    {
      ...RedisEnv,
      ...MetricsEnv,
      /** The port of Twilio's webhooks and media WebSocket (`/telephony/*`), apart from the builder API's. */
      TELEPHONY_PORT: envInt(8090),
      TELEPHONY_HOST: z.string().min(1).default('0.0.0.0'),
      /**
       * The public base URL Twilio calls (`https://phone.example.com`): the signed URL of every webhook, and the
       * Stream URL's (`wss://…`). Unset: the request's Host with `http`/`ws` (local development only).
       */
      PUBLIC_URL: unsetIfEmpty(
        z
          .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
          .transform((v) => v.replace(/\/+$/, ''))
          .optional(),
      ),
      /** The account's auth token: every webhook's and media socket's signature is checked with it. */
      TWILIO_AUTH_TOKEN: z.string().min(1, 'must be set: every Twilio request is checked with it'),
      /** The account a transfer's REST call acts for. Unset: transfers to a number are refused. */
      TWILIO_ACCOUNT_SID: unsetIfEmpty(
        z
          .string()
          .regex(/^AC[0-9a-fA-F]{32}$/, 'must be a Twilio account SID (AC + 32 hex digits)')
          .optional(),
      ),
      /** Twilio's REST API (a test points it at a stub). */
      TWILIO_API_BASE_URL: z
        .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
        .transform((v) => v.replace(/\/+$/, ''))
        .default('https://api.twilio.com'),
      /**
       * Internal hosts, addresses and CIDR ranges the REST calls to TWILIO_API_BASE_URL may reach (no default:
       * Twilio's API is public; a stub on loopback in a test needs `127.0.0.1`), as FLOW_EGRESS_ALLOW.
       */
      TWILIO_EGRESS_ALLOW: envParsed<AllowEntry[]>(parseAllowList),
      /** How long the call token in a Stream's TwiML opens its media socket (single use). */
      CALL_TOKEN_TTL_MS: envInt(30_000, 1000),
      /** How far ahead of real time a media socket's audio may run before it is closed. */
      MEDIA_BURST_MS: envInt(2000, 100),
      /**
       * Connections one address may hold open at once (0: no cap), as the gateway's: behind a proxy every
       * connection is the proxy's (set 0 there and cap at the proxy).
       */
      MAX_CONNECTIONS_PER_ADDRESS: envInt(256, 0),
      /** The TLS proxy in front, whose X-Forwarded-For names the client the limits count (parseTrustProxy). */
      TRUST_PROXY: envParsed(parseTrustProxy),
      /**
       * Requests per minute from one address (IPv4, IPv6 /64), signed and unsigned each in a budget of its own,
       * and signed ones in all.
       */
      WEBHOOK_RATE_PER_ADDRESS: envInt(300, 1),
      WEBHOOK_RATE_TOTAL: envInt(6000, 1),
    },
    env,
  );
}
