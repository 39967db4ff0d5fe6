import { describe, expect, it } from 'vitest';
import { callerKeys } from './server.js';

describe('a phone caller’s canary key', () => {
  const keyOf = callerKeys('twilio-auth-token-0123456789');

  it('is the same for a number each call, another for another number, and never holds the number', () => {
    const a = keyOf('+14155550100');
    expect(a).toBe(keyOf('+14155550100'));
    expect(a).not.toBe(keyOf('+14155550101'));
    expect(a).not.toContain('4155550100');
    // another account's token keys the same number apart
    expect(callerKeys('another-auth-token-0123456789')('+14155550100')).not.toBe(a);
  });

  it('is none for a withheld number: such calls are drawn afresh, not all kept on one side', () => {
    for (const withheld of ['anonymous', 'restricted', '+266696687', '', 'client:alice'])
      expect(keyOf(withheld), withheld).toBeUndefined();
  });
});
