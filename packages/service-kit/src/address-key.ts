import ipaddr from 'ipaddr.js';
import { isIPv6 } from 'node:net';

/**
 * The address a limit counts: an IPv4 address as it is, an IPv6 one by its /64 (one host, one home or one
 * cloud instance gets a whole /64: counting single addresses would give it 2^64 budgets). IPv4-mapped IPv6
 * (`::ffff:1.2.3.4`, a dual-stack listener's view of an IPv4 client) counts as the IPv4 address.
 */
export function addressKey(ip: string): string {
  if (!isIPv6(ip)) return ip;
  let address: ipaddr.IPv6;
  try {
    address = ipaddr.IPv6.parse(ip);
  } catch {
    // what Node calls IPv6 and ipaddr.js does not: counted as it is written
    return ip.toLowerCase();
  }
  if (address.isIPv4MappedAddress()) return address.toIPv4Address().toString();
  return `${address.parts
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

/** proxy-addr's (and so Fastify's `trustProxy`) names for address ranges. */
const NAMED_RANGES: Record<string, string[]> = {
  loopback: ['127.0.0.1/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * Whether an address is one of `entries` (addresses, CIDR ranges, or `loopback`/`linklocal`/`uniquelocal`, as
 * Fastify's `trustProxy` takes them): an IPv4-mapped IPv6 address as its IPv4 one. An entry that is none of
 * these matches nothing (the configuration checks them first).
 */
export function addressMatcher(entries: readonly string[]): (ip: string) => boolean {
  const ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] = [];
  for (const entry of entries.flatMap((e) => NAMED_RANGES[e] ?? [e])) {
    try {
      ranges.push(entry.includes('/') ? ipaddr.parseCIDR(entry) : rangeOf(ipaddr.parse(entry)));
    } catch {
      // not an address: matches nothing
    }
  }
  return (ip) => {
    let address: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      address = ipaddr.process(ip);
    } catch {
      return false;
    }
    return ranges.some(([base, bits]) => base.kind() === address.kind() && address.match(base, bits));
  };
}

const rangeOf = (a: ipaddr.IPv4 | ipaddr.IPv6): [ipaddr.IPv4 | ipaddr.IPv6, number] => [
  a,
  a.kind() === 'ipv4' ? 32 : 128,
];
