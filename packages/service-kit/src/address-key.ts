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
