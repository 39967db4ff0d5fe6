import { describe, expect, it } from 'vitest';
import { outcomeOf, retryAfterMs, retryDelayMs } from './backoff.js';
import { signatureHeader, verifySignature } from './signing.js';

describe('the signature', () => {
  const body = '{"id":"e1","type":"call.ended"}';
  const now = 1_800_000_000_000;

  it('verifies with its secret within the window, and with no other secret, body or time', () => {
    const header = signatureHeader(body, ['whsec_one_one_one_one_one_one'], now);
    expect(header).toMatch(/^t=1800000000,v1=[0-9a-f]{64}$/);
    expect(verifySignature(header, body, 'whsec_one_one_one_one_one_one', now + 299_000)).toBe(true);
    expect(verifySignature(header, body, 'whsec_two_two_two_two_two_two', now)).toBe(false);
    expect(verifySignature(header, `${body} `, 'whsec_one_one_one_one_one_one', now)).toBe(false);
    expect(verifySignature(header, body, 'whsec_one_one_one_one_one_one', now + 301_000)).toBe(false);
  });

  it('carries one v1 per secret during an overlap, each verifying alone', () => {
    const header = signatureHeader(body, ['new-secret-new-secret-new', 'old-secret-old-secret-old'], now);
    expect(header.split(',')).toHaveLength(3);
    expect(verifySignature(header, body, 'new-secret-new-secret-new', now)).toBe(true);
    expect(verifySignature(header, body, 'old-secret-old-secret-old', now)).toBe(true);
  });
});

describe('the retry schedule', () => {
  const policy = { firstMs: 5000, maxDelayMs: 6 * 3_600_000, forMs: 24 * 3_600_000 };

  it('grows ×3 from the first delay up to the cap, and covers 24 hours in about a dozen attempts', () => {
    const mid = () => 0.5; // no jitter
    expect([1, 2, 3].map((n) => retryDelayMs(policy, n, mid))).toEqual([5000, 15_000, 45_000]);
    expect(retryDelayMs(policy, 20, mid)).toBe(policy.maxDelayMs);
    let elapsed = 0;
    let attempts = 1;
    while (elapsed < policy.forMs) elapsed += retryDelayMs(policy, attempts++, mid);
    expect(attempts).toBeLessThan(16);
  });

  it('retries timeouts’ kin (408, 429, 5xx), not other 4xx or redirects', () => {
    expect([200, 204].map(outcomeOf)).toEqual(['ok', 'ok']);
    expect([408, 429, 500, 503].map(outcomeOf)).toEqual(['retry', 'retry', 'retry', 'retry']);
    expect([301, 400, 401, 404, 410].map(outcomeOf)).toEqual(['fail', 'fail', 'fail', 'fail', 'fail']);
  });

  it('reads Retry-After as seconds or a date', () => {
    expect(retryAfterMs('120', 0)).toBe(120_000);
    expect(retryAfterMs(new Date(60_000).toUTCString(), 0)).toBe(60_000);
    expect(retryAfterMs('soon', 0)).toBeUndefined();
  });
});
