import { describe, expect, it } from 'vitest';
import { canaryVerdict, successZ } from './canary.js';

const side = (
  deployId: string,
  judged: number,
  passed: number,
  timed = 0,
  responseP50Ms: number | null = null,
) => ({
  deployId,
  judged,
  passed,
  successRate: judged > 0 ? passed / judged : null,
  timed,
  responseP50Ms,
});
const rule = { minCalls: 20, maxSlowdownMs: 300 };

describe('the canary rule (decision 0035)', () => {
  it('rolls back a canary whose success rate is worse beyond the one-sided 95 % bound, with enough calls', () => {
    // 20/20 passed against 0/20: z ≈ 6.3
    expect(canaryVerdict(side('c', 20, 0), side('l', 20, 20), rule)).toMatchObject({
      rule: 'success_rate',
      z: 6.325,
    });
    // the same figures below the minimum: kept
    expect(canaryVerdict(side('c', 19, 0), side('l', 40, 40), rule)).toBeNull();
    // 80 % against 90 % over 20 calls each: z ≈ 0.88, inside the bound
    expect(canaryVerdict(side('c', 20, 16), side('l', 20, 18), rule)).toBeNull();
    // 50 % against 90 % over 40 each: z ≈ 3.9
    expect(canaryVerdict(side('c', 40, 20), side('l', 40, 36), rule)?.rule).toBe('success_rate');
    // a canary doing better is never rolled back
    expect(canaryVerdict(side('c', 40, 40), side('l', 40, 10), rule)).toBeNull();
  });

  it('rolls back a canary slower beyond the threshold, without analysis', () => {
    expect(canaryVerdict(side('c', 0, 0, 20, 1400), side('l', 0, 0, 20, 1000), rule)).toMatchObject({
      rule: 'response_time',
      z: null,
    });
    expect(canaryVerdict(side('c', 0, 0, 20, 1250), side('l', 0, 0, 20, 1000), rule)).toBeNull();
    expect(canaryVerdict(side('c', 0, 0, 19, 5000), side('l', 0, 0, 20, 1000), rule)).toBeNull();
  });

  it('z is null without judged calls and 0 when both sides agree entirely', () => {
    expect(successZ({ judged: 0, passed: 0 }, { judged: 5, passed: 5 })).toBeNull();
    expect(successZ({ judged: 5, passed: 5 }, { judged: 5, passed: 5 })).toBe(0);
  });
});
