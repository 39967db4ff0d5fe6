import { describe, expect, it } from 'vitest';
import { parseSealingKey, SecretBox } from './sealing.js';

describe('SecretBox', () => {
  const a = Buffer.alloc(32, 1);
  const b = Buffer.alloc(32, 2);

  it('seals so that only its keys open, and an old key still opens what it sealed', () => {
    const sealed = new SecretBox(a).seal('whsec_secret');
    expect(sealed).not.toContain('whsec_secret');
    expect(new SecretBox(a).unseal(sealed)).toBe('whsec_secret');
    expect(new SecretBox(b, [a]).unseal(sealed)).toBe('whsec_secret');
    expect(() => new SecretBox(b).unseal(sealed)).toThrow(/unknown key/);
  });

  it('refuses an altered value', () => {
    const parts = new SecretBox(a).seal('whsec_secret').split('.');
    parts[4] = Buffer.from('whsec_secreT').toString('base64url');
    expect(() => new SecretBox(a).unseal(parts.join('.'))).toThrow();
  });

  it('reads a key as hex or base64, and says what is wrong without the value', () => {
    expect(parseSealingKey('01'.repeat(32))).toEqual(a);
    expect(parseSealingKey(a.toString('base64'))).toEqual(a);
    expect(() => parseSealingKey('short')).toThrow('must be 32 bytes');
  });
});
