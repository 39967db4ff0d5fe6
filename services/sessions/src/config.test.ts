import { describe, expect, it } from 'vitest';
import { deploySweepFrom, loadConfig, testRunsFrom } from './config.js';

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

describe('the deploy sweep settings', () => {
  it('fail a pipeline deploy only well past the readiness check bound it waits on', () => {
    expect(deploySweepFrom(loadConfig({}))).toEqual({
      intervalMs: 15_000,
      checkTimeoutMs: 30_000,
      interruptedAfterMs: 60_000,
    });
    expect(deploySweepFrom(loadConfig({ DEPLOY_CHECK_TIMEOUT_MS: '90000' })).interruptedAfterMs).toBe(
      120_000,
    );
    expect(() => loadConfig({ DEPLOY_SWEEP_INTERVAL_MS: '10' })).toThrow('DEPLOY_SWEEP_INTERVAL_MS');
  });
});
