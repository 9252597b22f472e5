import { lookup as dnsLookup } from 'node:dns/promises';
import net from 'node:net';

/**
 * Where a webhook may be sent: by default `https://` to public addresses only (SSRF). Checked at registration and
 * before every delivery, and the socket pinned to the address checked (`pinnedLookup`), so DNS rebinding cannot redirect it.
 */

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (hostname) => {
  const all = await dnsLookup(hostname, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

export class TargetError extends Error {
  constructor(
    readonly code: 'invalid_url' | 'forbidden_scheme' | 'forbidden_address' | 'unresolvable',
    message: string,
  ) {
    super(message);
  }
}

type Range = readonly [base: number, bits: number, label: string];

const v4 = (a: number, b: number, c: number, d: number) =>
  ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;

/** IPv4 ranges that are not public unicast (RFC 6890 and successors). */
const IPV4_BLOCKED: Range[] = [
  [v4(0, 0, 0, 0), 8, 'unspecified ("this network")'],
  [v4(10, 0, 0, 0), 8, 'private'],
  [v4(100, 64, 0, 0), 10, 'carrier-grade NAT'],
  [v4(127, 0, 0, 0), 8, 'loopback'],
  [v4(169, 254, 0, 0), 16, 'link-local'],
  [v4(172, 16, 0, 0), 12, 'private'],
  [v4(192, 0, 0, 0), 24, 'IETF protocol assignments'],
  [v4(192, 0, 2, 0), 24, 'documentation'],
  [v4(192, 88, 99, 0), 24, '6to4 relay anycast'],
  [v4(192, 168, 0, 0), 16, 'private'],
  [v4(198, 18, 0, 0), 15, 'benchmarking'],
  [v4(198, 51, 100, 0), 24, 'documentation'],
  [v4(203, 0, 113, 0), 24, 'documentation'],
  [v4(224, 0, 0, 0), 4, 'multicast'],
  [v4(240, 0, 0, 0), 4, 'reserved or broadcast'],
];

function parseIpv4(text: string): number | null {
  if (!net.isIPv4(text)) return null;
  const [a, b, c, d] = text.split('.').map(Number);
  return v4(a, b, c, d);
}

function ipv4Reason(n: number): string | null {
  for (const [base, bits, label] of IPV4_BLOCKED) {
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    if ((n & mask) >>> 0 === base) return label;
  }
  return null;
}

/** Zone id dropped, embedded dotted quad allowed. */
function parseIpv6(text: string): number[] | null {
  const bare = text.split('%')[0];
  if (!net.isIPv6(bare)) return null;
  let s = bare.toLowerCase();
  let tail: number[] = [];
  if (s.includes('.')) {
    const at = s.lastIndexOf(':');
    const n = parseIpv4(s.slice(at + 1));
    if (n === null) return null;
    tail = [n >>> 16, n & 0xffff];
    s = s.slice(0, at + 1);
    if (!s.endsWith('::')) s = s.slice(0, -1);
  }
  const gap = s.indexOf('::');
  const hex = (x: string) => (x === '' ? [] : x.split(':').map((h) => parseInt(h, 16)));
  const left = hex(gap >= 0 ? s.slice(0, gap) : s);
  const right = gap >= 0 ? hex(s.slice(gap + 2)) : [];
  const fill = 8 - tail.length - left.length - right.length;
  if (gap < 0 ? fill !== 0 : fill < 0) return null;
  const groups = [...left, ...Array<number>(gap >= 0 ? fill : 0).fill(0), ...right, ...tail];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff)
    ? groups
    : null;
}

const embeddedV4 = (hi: number, lo: number) => ((hi << 16) | lo) >>> 0;

function ipv6Reason(g: number[]): string | null {
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  // ::/96 (unspecified, loopback, IPv4-compatible) and ::ffff:0:0/96 (IPv4-mapped): judge the IPv4 inside.
  if (zeroUpTo(6)) {
    if (g[6] === 0 && g[7] === 0) return 'unspecified';
    if (g[6] === 0 && g[7] === 1) return 'loopback';
    const inner = ipv4Reason(embeddedV4(g[6], g[7]));
    return inner ? `${inner} (IPv4-compatible)` : 'IPv4-compatible (deprecated)';
  }
  if (zeroUpTo(5) && g[5] === 0xffff) {
    const inner = ipv4Reason(embeddedV4(g[6], g[7]));
    return inner ? `${inner} (IPv4-mapped)` : null;
  }
  // 64:ff9b::/96, NAT64 of an IPv4 address: judge that address.
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) {
    const inner = ipv4Reason(embeddedV4(g[6], g[7]));
    return inner ? `${inner} (NAT64)` : null;
  }
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'local-use NAT64';
  // 2002::/16, 6to4: the IPv4 address is in groups 1 and 2.
  if (g[0] === 0x2002) {
    const inner = ipv4Reason(embeddedV4(g[1], g[2]));
    return inner ? `${inner} (6to4)` : null;
  }
  if (g[0] === 0x0100 && g[1] === 0 && g[2] === 0 && g[3] === 0) return 'discard-only';
  if (g[0] === 0x2001 && g[1] === 0x0db8) return 'documentation';
  if (g[0] === 0x2001 && g[1] < 0x0200) return 'IETF protocol assignments (Teredo, ORCHID, …)';
  if (g[0] === 0x3fff && g[1] < 0x1000) return 'documentation';
  if ((g[0] & 0xfe00) === 0xfc00) return 'unique local (ULA)';
  if ((g[0] & 0xffc0) === 0xfe80) return 'link-local';
  if ((g[0] & 0xffc0) === 0xfec0) return 'site-local (deprecated)';
  if ((g[0] & 0xff00) === 0xff00) return 'multicast';
  return null;
}

/** Why an address is not public unicast ("loopback", …), or null when it is. Anything not an IP address is refused. */
export function nonPublicReason(address: string): string | null {
  const n4 = parseIpv4(address);
  if (n4 !== null) return ipv4Reason(n4);
  const g = parseIpv6(address);
  if (g !== null) return ipv6Reason(g);
  return 'not an IP address';
}

export interface TargetPolicy {
  allowPrivate: boolean;
}

export function parseTargetUrl(raw: string, policy: TargetPolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TargetError('invalid_url', `"${raw}" is not an absolute URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new TargetError(
      'forbidden_scheme',
      `webhook URLs must be https:// (got ${url.protocol})`,
    );
  if (url.protocol === 'http:' && !policy.allowPrivate) {
    throw new TargetError(
      'forbidden_scheme',
      'webhook URLs must be https://; plain http:// is allowed only towards loopback or private addresses, and only when the config sets webhooks.allow_private_targets',
    );
  }
  if (url.username || url.password)
    throw new TargetError(
      'invalid_url',
      'webhook URLs must not carry credentials (user:password@); put a token in the path or query instead',
    );
  if (url.hash) throw new TargetError('invalid_url', 'webhook URLs must not have a #fragment');
  if (!url.hostname) throw new TargetError('invalid_url', 'the webhook URL has no host');
  return url;
}

export function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** Checks EVERY address the host resolves to; the caller connects to one of these and nothing else. */
export async function resolveTarget(
  url: URL,
  policy: TargetPolicy,
  resolve: Resolver = systemResolver,
): Promise<ResolvedAddress[]> {
  const host = bareHost(url);
  let addresses: ResolvedAddress[];
  const literal = net.isIP(host.split('%')[0]);
  if (literal) {
    addresses = [{ address: host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await resolve(host);
    } catch (err) {
      throw new TargetError(
        'unresolvable',
        `${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      );
    }
    if (addresses.length === 0) throw new TargetError('unresolvable', `${host} does not resolve`);
  }
  const judged = addresses.map((a) => ({ ...a, reason: nonPublicReason(a.address) }));
  if (policy.allowPrivate) {
    // Plain http only where it cannot leave the local networks.
    const publicOne = judged.find((a) => a.reason === null);
    if (url.protocol === 'http:' && publicOne) {
      throw new TargetError(
        'forbidden_scheme',
        `plain http:// is allowed only towards loopback or private addresses; ${host} resolves to the public address ${publicOne.address} (use https://)`,
      );
    }
    return addresses;
  }
  const bad = judged.find((a) => a.reason !== null);
  if (bad) {
    const via = literal ? '' : `${host} resolves to `;
    throw new TargetError(
      'forbidden_address',
      `${via}${bad.address}, a ${bad.reason} address: webhooks go to public addresses only (set webhooks.allow_private_targets to allow loopback and private networks)`,
    );
  }
  return addresses;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | { address: string; family: number }[],
  family?: number,
) => void;

/** Answers with the address already checked, whatever the DNS says now. */
export function pinnedLookup(target: ResolvedAddress) {
  return (
    _hostname: string,
    options: { all?: boolean } | number | LookupCallback,
    callback?: LookupCallback,
  ): void => {
    const cb = (typeof options === 'function' ? options : callback)!;
    const all = typeof options === 'object' && options !== null && options.all === true;
    const address = target.address.split('%')[0];
    if (all) cb(null, [{ address, family: target.family }]);
    else cb(null, address, target.family);
  };
}
