/** The retry schedule's settings (config.ts): first delay, the cap, how long retries go on. */
export interface RetryPolicy {
  firstMs: number;
  maxDelayMs: number;
  forMs: number;
}

/**
 * The delay before attempt `attempts + 1`, after `attempts` failed ones: `firstMs · 3^(attempts-1)`, capped,
 * ±20 % jitter so endpoints that failed together do not come back in one burst. With the defaults (5 s, 6 h
 * cap, 24 h) that is about 12 attempts over the day: 5 s, 15 s, 45 s, 2 min, 7 min, 20 min, 1 h, 3 h, 6 h, …
 */
export function retryDelayMs(policy: RetryPolicy, attempts: number, random = Math.random): number {
  const base = Math.min(policy.maxDelayMs, policy.firstMs * 3 ** Math.max(0, attempts - 1));
  return Math.max(1, Math.round(base * (0.8 + 0.4 * random())));
}

/**
 * What a receiver's answer means: `ok` (2xx), `retry` (408, 429, 5xx: the receiver may take it later), or
 * `fail` (any other status: a 4xx says the request itself is refused, a 3xx is a redirect we do not follow).
 */
export function outcomeOf(status: number): 'ok' | 'retry' | 'fail' {
  if (status >= 200 && status < 300) return 'ok';
  if (status === 408 || status === 429 || status >= 500) return 'retry';
  return 'fail';
}

/** A `Retry-After` header's delay in ms (seconds or an HTTP date), when it names a sane one. */
export function retryAfterMs(value: string | null, nowMs: number): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}
