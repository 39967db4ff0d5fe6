import { describe, expect, it } from 'vitest';
import { loadConfig, testRunsFrom } from './config.js';

describe('the test-run settings', () => {
  it('start an attempt whose instance was lost TEST_CASE_RETRIES more times (one by default)', () => {
    expect(testRunsFrom(loadConfig({})).attempts).toBe(2);
    expect(testRunsFrom(loadConfig({ TEST_CASE_RETRIES: '0' })).attempts).toBe(1);
  });

  it('refuse the old name, saying what it became', () => {
    expect(() => loadConfig({ TEST_CASE_ATTEMPTS: '3' })).toThrow(
      'TEST_CASE_ATTEMPTS is now TEST_CASE_RETRIES: the starts after the first (TEST_CASE_ATTEMPTS − 1)',
    );
  });
});
