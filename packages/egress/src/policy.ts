import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** One entry of the operator's allow-list (`FLOW_EGRESS_ALLOW`): a host name, or an address range. */
export type AllowEntry = { kind: 'host'; host: string } | { kind: 'range'; range: [Address, number] };

export type UrlVerdict = { ok: true; url: URL } | { ok: false; reason: string };

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$/;

const bare = (host: string) =>
  host
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');

const v4 = (hi: number, lo: number) => ipaddr.fromByteArray([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);

/**
 * The IPv4 address an IPv6 one carries, for every form that leads to it: IPv4-mapped (`::ffff:a.b.c.d`),
 * IPv4-translated (`::ffff:0:a.b.c.d`), the deprecated IPv4-compatible `::a.b.c.d` (`::/96`, which
 * ipaddr.js calls plain unicast, and which a dual-stack host may route to the IPv4 address), NAT64's
 * well-known prefix (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/16`). Such an address is judged by the
 * IPv4 one inside, so `[::127.0.0.1]` is loopback and `[64:ff9b::a9fe:a9fe]` is link-local. Any other
 * address is returned as it is (Teredo and NAT64's local-use prefix stay non-unicast, so internal).
 */
function unmapped(a: Address): Address {
  if (a.kind() === 'ipv4') return a;
  const p = (a as ipaddr.IPv6).parts;
  const zeros = (from: number, to: number) => p.slice(from, to).every((x) => x === 0);
  if ((a as ipaddr.IPv6).isIPv4MappedAddress()) return (a as ipaddr.IPv6).toIPv4Address();
  // ::ffff:0:a.b.c.d (IPv4-translated) and ::a.b.c.d (IPv4-compatible; :: and ::1 are themselves)
  if (zeros(0, 4) && p[4] === 0xffff && p[5] === 0) return v4(p[6]!, p[7]!);
  if (zeros(0, 6) && (p[6] !== 0 || p[7]! > 1)) return v4(p[6]!, p[7]!);
  if (p[0] === 0x64 && p[1] === 0xff9b && zeros(2, 6)) return v4(p[6]!, p[7]!);
  if (p[0] === 0x2002) return v4(p[1]!, p[2]!);
  return a;
}

function parseAddress(text: string): Address | undefined {
  const s = bare(text).replace(/%.*$/, ''); // an IPv6 zone (fe80::1%eth0) names an interface, not a host
  return ipaddr.isValid(s) ? unmapped(ipaddr.parse(s)) : undefined;
}

/** ipaddr.js's range names, as messages and logs say them. */
const RANGE_WORDS: Record<string, string> = {
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  carrierGradeNat: 'carrier-grade NAT',
  rfc6052: 'NAT64',
  rfc6145: 'IPv4-translated',
  '6to4': '6to4',
};

/**
 * What kind of internal address this is (loopback, private, link-local, unique-local, unspecified,
 * multicast, …), or undefined for a public unicast address. Every range ipaddr.js does not call `unicast`
 * counts as internal: reserved, carrier-grade NAT, 6to4 and NAT64 forms included.
 */
export function internalRange(address: string): string | undefined {
  const a = parseAddress(address);
  if (!a) return 'invalid';
  const range = a.range();
  return range === 'unicast' ? undefined : (RANGE_WORDS[range] ?? range);
}

/** Parses `FLOW_EGRESS_ALLOW`: comma-separated host names, addresses and CIDR ranges. Throws on a bad entry. */
export function parseAllowList(text: string | undefined): AllowEntry[] {
  const entries: AllowEntry[] = [];
  for (const raw of (text ?? '').split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    if (item.includes('/')) {
      try {
        const [addr, bits] = ipaddr.parseCIDR(bare(item));
        // ::ffff:10.0.0.0/104 is 10.0.0.0/8 written as IPv6
        const mapped = addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96;
        entries.push({
          kind: 'range',
          range: mapped ? [(addr as ipaddr.IPv6).toIPv4Address(), bits - 96] : [addr, bits],
        });
      } catch {
        throw new Error(`"${item}" is not a CIDR range`);
      }
      continue;
    }
    const address = parseAddress(item);
    if (address) {
      entries.push({ kind: 'range', range: [address, address.kind() === 'ipv4' ? 32 : 128] });
    } else if (HOST_NAME.test(bare(item))) {
      entries.push({ kind: 'host', host: bare(item) });
    } else {
      throw new Error(`"${item}" is neither a host name, an address nor a CIDR range`);
    }
  }
  return entries;
}

/**
 * Which addresses a flow may make this server call: public unicast addresses always; internal ones
 * (loopback, private, link-local, unique-local, unspecified, multicast and the IPv4-mapped forms of these)
 * only when the operator's allow-list names the host or covers the address.
 */
export class EgressPolicy {
  constructor(private readonly allow: readonly AllowEntry[]) {}

  /** Whether a URL naming `host` may connect to `address` (what its name resolved to, or itself). */
  permits(host: string, address: string): boolean {
    const a = parseAddress(address);
    if (!a) return false;
    if (a.range() === 'unicast') return true;
    const name = bare(host);
    return this.allow.some((e) =>
      e.kind === 'host' ? e.host === name : e.range[0].kind() === a.kind() && a.match(e.range),
    );
  }

  /**
   * The check of a URL's text, made before anything runs: the scheme, and a host that is itself an
   * address (`http://10.0.0.1`, `http://[::ffff:127.0.0.1]`, `http://2130706433` — the URL parser
   * normalizes the numeric forms) or a name that is loopback by definition (`localhost`). Any other name is
   * checked again at connect time, against what it resolves to then.
   */
  checkUrl(text: string): UrlVerdict {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return { ok: false, reason: 'is not a URL' };
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return { ok: false, reason: 'must be an http(s) URL' };
    }
    const host = bare(url.hostname);
    const addresses = isIP(host)
      ? [host]
      : host === 'localhost' || host.endsWith('.localhost')
        ? ['127.0.0.1', '::1']
        : [];
    if (addresses.length > 0 && !addresses.some((a) => this.permits(host, a))) {
      return {
        ok: false,
        reason: `reaches ${host}, a ${internalRange(addresses[0]!)} address, which the server's FLOW_EGRESS_ALLOW does not allow`,
      };
    }
    return { ok: true, url };
  }
}
