import { describe, expect, it } from 'vitest';
import { addressKey, addressMatcher } from './address-key.js';

describe('addressKey', () => {
  it('counts IPv4 as it is, IPv4-mapped IPv6 as IPv4, and IPv6 by its /64', () => {
    expect(addressKey('127.0.0.1')).toBe('127.0.0.1');
    expect(addressKey('::ffff:10.0.0.7')).toBe('10.0.0.7');
    expect(addressKey('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:DB8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('2001:db8:1:2:3::')).toBe('2001:db8:1:2::/64');
    // leading zeros, a zone, the mapped form written in hex: the same keys
    expect(addressKey('2001:0db8:0001:0002::1')).toBe('2001:db8:1:2::/64');
    expect(addressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressKey('::ffff:a00:7')).toBe('10.0.0.7');
    expect(addressKey('::FFFF:10.0.0.7')).toBe('10.0.0.7');
    // not an address: as it is (a socket that has already closed has none)
    expect(addressKey('')).toBe('');
  });
});

describe('addressMatcher', () => {
  it("matches addresses, CIDR ranges and proxy-addr's range names, an IPv4-mapped address as IPv4", () => {
    const trusted = addressMatcher(['10.0.0.0/8', '2001:db8::/32', '192.0.2.7', 'loopback']);
    expect(
      ['10.1.2.3', '::ffff:10.9.9.9', '2001:db8:1::5', '192.0.2.7', '127.0.0.1', '::1'].map(trusted),
    ).toEqual([true, true, true, true, true, true]);
    expect(['11.0.0.1', '2001:db9::1', '192.0.2.8', '', 'not-an-address'].map(trusted)).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(addressMatcher([])('127.0.0.1')).toBe(false);
  });
});
