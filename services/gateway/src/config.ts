import { configProblem, envInt, loadConfig as load, RedisEnv } from '@vab/service-kit';
import { z } from 'zod';
import type { EventStreamSettings } from './events.js';
import type { SecurityConfig } from './security.js';

const Env = {
  HOST: z.string().default('127.0.0.1'),
  PORT: envInt(3000, 0),
  /** Largest accepted request body; kept below the bus payload limit (checked at start). */
  BODY_LIMIT_BYTES: envInt(1024 * 1024, 1024),
  /** How long the gateway waits for a service's reply before answering 504. */
  REQUEST_TIMEOUT_MS: envInt(5000, 50),
  READY_TIMEOUT_MS: envInt(1000, 50),
  /**
   * How long a request's headers and body may take to arrive (Node's requestTimeout): a body that trickles
   * or stalls is cut off with 408 after it. Not a bound on the answer (an event stream runs for as long).
   */
  REQUEST_RECEIVE_TIMEOUT_MS: envInt(30_000, 100),
  /** Connections one address may hold open at once (more are closed on accept); 0: no cap (behind a proxy). */
  MAX_CONNECTIONS_PER_ADDRESS: envInt(256, 0),
  /** Comma-separated bearer tokens required on /api/*; unset: the API is open. */
  API_TOKENS: z.string().optional(),
  /** Comma-separated origins allowed by CORS; unset: no cross-origin access. */
  CORS_ORIGINS: z.string().optional(),
  RATE_LIMIT_MAX: envInt(600, 1),
  RATE_LIMIT_WINDOW_MS: envInt(60_000, 1000),
  /**
   * Requests without a valid token (none, a wrong one, a bad ticket) one address may make per
   * RATE_LIMIT_WINDOW_MS; past it everything from that address answers 429 until the window ends.
   */
  AUTH_FAILURE_LIMIT_MAX: envInt(30, 1),
  /** Per caller and window, for what starts sessions: POST /api/agent-session, text sessions, test runs. */
  SESSION_RATE_LIMIT_MAX: envInt(20, 1),
  /** Redis for rate-limit counters shared by every gateway instance (only counters, never API data). */
  RATE_LIMIT_REDIS_URL: z.string().optional(),
  /** The same counters on a Redis Cluster (seed `host:port,…`); wins over RATE_LIMIT_REDIS_URL. */
  RATE_LIMIT_REDIS_CLUSTER_NODES: RedisEnv.REDIS_CLUSTER_NODES,
  /**
   * The backend this one runs beside: every request the route table does not serve is proxied there
   * (HTTP, streamed answers and WebSocket upgrades). Unset: such requests answer 404.
   */
  UPSTREAM_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  /** How long a proxied request waits for the upstream's answer to begin (504 after). */
  UPSTREAM_TIMEOUT_MS: envInt(30_000, 100),
  /** An event stream's heartbeat (a comment line): proxies keep it open; a lost session is noticed as often. */
  SSE_HEARTBEAT_MS: envInt(15_000, 100),
  /** Event streams one client address may hold open at once (429 past it). */
  SSE_MAX_STREAMS_PER_CLIENT: envInt(20, 1),
  /** Bytes a client may leave unread on an event stream before it is cut off. */
  SSE_MAX_BUFFER_BYTES: envInt(1024 * 1024, 1024),
  /**
   * Bytes of one session's latest events kept in memory while it has readers here: a late reader catches up
   * from them instead of opening a consumer of its own.
   */
  SSE_FEED_BUFFER_BYTES: envInt(256 * 1024, 0),
  /**
   * Whether the caller's `Authorization` goes on to the upstream. Off: it is our credential, not the
   * upstream's, and is removed.
   */
  UPSTREAM_FORWARD_AUTHORIZATION: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('false')
    .transform((v) => v === 'true'),
  /** How long a ticket (POST /api/tickets) may be used; every gateway sharing API_TOKENS should share it. */
  TICKET_TTL_MS: envInt(30_000, 1000),
  /**
   * Where clients reach this API (`https://api.example.com`), as the API document's `servers` says;
   * unset: a relative server (`/`), the origin that served the document.
   */
  PUBLIC_URL: z
    .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
    .transform((v) => v.replace(/\/+$/, ''))
    .optional(),
  /**
   * A wildcard domain for live deploys' talk pages (`live.example.com`): `https://<subdomain>.<LIVE_DOMAIN>/`
   * answers the page of that subdomain (as `/live/<subdomain>`); unset: only `/live/<subdomain>`.
   */
  LIVE_DOMAIN: z
    .string()
    .regex(
      /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/i,
      'must be a host name such as live.example.com',
    )
    .transform((v) => v.toLowerCase())
    .optional(),
  /**
   * The key of the HMAC that keeps a live caller's address as `caller.addressHash` (and counts it for the
   * per-address cap): the same on every gateway, at least 32 characters. Unset: a random key per start (hashes
   * change at every restart and differ between gateways; a warning says so).
   */
  CALLER_HASH_KEY: z
    .string()
    .min(32, 'must be at least 32 characters (e.g. openssl rand -hex 32)')
    .optional(),
  /** Calls one publishable key may start per RATE_LIMIT_WINDOW_MS, whatever the address (429 past it). */
  LIVE_KEY_RATE_LIMIT_MAX: envInt(60, 1),
  /** Not a setting: a common misspelling of API_TOKENS, refused so the API is never left open by it. */
  API_TOKEN: z.string().optional(),
};

/** The event stream settings a configuration asks for. */
export function eventStreamsOf(config: GatewayConfig): Partial<EventStreamSettings> {
  return {
    heartbeatMs: config.SSE_HEARTBEAT_MS,
    maxStreamsPerClient: config.SSE_MAX_STREAMS_PER_CLIENT,
    maxBufferBytes: config.SSE_MAX_BUFFER_BYTES,
    feedBufferBytes: config.SSE_FEED_BUFFER_BYTES,
  };
}

/** The security settings a configuration asks for (the shared rate-limit store is the caller's to add). */
export function securityOf(config: GatewayConfig): Omit<SecurityConfig, 'rateLimitRedis'> {
  return {
    apiTokens: list(config.API_TOKENS),
    corsOrigins: list(config.CORS_ORIGINS),
    rateLimitMax: config.RATE_LIMIT_MAX,
    rateLimitWindowMs: config.RATE_LIMIT_WINDOW_MS,
    sessionRateLimitMax: config.SESSION_RATE_LIMIT_MAX,
    authFailureLimitMax: config.AUTH_FAILURE_LIMIT_MAX,
  };
}

export const list = (v: string | undefined): string[] =>
  (v ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

export type GatewayConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv) {
  const config = load(Env, env);
  if (config.API_TOKEN !== undefined && config.API_TOKENS === undefined) {
    throw configProblem(
      'API_TOKENS',
      'is not set, but API_TOKEN is: the gateway reads API_TOKENS (comma-separated tokens)',
    );
  }
  return config;
}
