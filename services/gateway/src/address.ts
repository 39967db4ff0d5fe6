import { isIPv6 } from 'node:net';

/**
 * The address a limit counts: an IPv4 address as it is, an IPv6 one by its /64 (one host, one home or one
 * cloud instance gets a whole /64: counting single addresses would give it 2^64 budgets). IPv4-mapped IPv6
 * (`::ffff:1.2.3.4`, a dual-stack listener's view of an IPv4 client) counts as the IPv4 address.
 */
export function addressKey(ip: string): string {
  if (!isIPv6(ip)) return ip;
  const lower = ip.toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = lower.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => (parseInt(g, 16) || 0).toString(16))
    .join(':')}::/64`;
}
