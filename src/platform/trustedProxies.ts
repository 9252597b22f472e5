import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import proxyAddr from 'proxy-addr';

/** Names proxy-addr expands to address ranges (loopback: 127.0.0.0/8 and ::1, …). */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * Why `entry` cannot name a trusted proxy, or null when it can: an IP address, a CIDR
 * (`10.0.0.0/8`, `2001:db8::/32`, or `10.0.0.0/255.0.0.0`), or `loopback`, `linklocal`,
 * `uniquelocal`. The address must be written plainly: proxy-addr (ipaddr.js) would also read
 * `127.1` or `0x7f000001` as addresses, which no config means.
 */
export function trustedProxyProblem(entry: string): string | null {
  if (NAMED_RANGES.has(entry)) return null;
  const slash = entry.lastIndexOf('/');
  if (net.isIP(slash === -1 ? entry : entry.slice(0, slash)) === 0) {
    return 'is not an IP address, a CIDR (10.0.0.0/8, 2001:db8::/32) or one of loopback, linklocal, uniquelocal';
  }
  try {
    proxyAddr.compile(entry);
  } catch {
    return 'has an invalid prefix length';
  }
  return null;
}

/**
 * Our own proxies (load balancers) in front of Postern, as the config lists them (see
 * trustedProxyProblem; the config refuses anything else before start). Only they are believed
 * when they say where a connection really comes from: the X-Forwarded-For header on HTTP, the
 * PROXY protocol header on SMTP.
 */
export class TrustedProxies {
  private readonly trust: (address: string, hop: number) => boolean;

  constructor(readonly entries: readonly string[]) {
    this.trust = proxyAddr.compile([...entries]);
  }

  /** Whether the TCP peer `address` is one of them (an IPv4 peer of a dual-stack listener, `::ffff:a.b.c.d`, matches its IPv4 entry). */
  includes(address: string | undefined): boolean {
    return address !== undefined && this.entries.length > 0 && this.trust(address, 0);
  }

  /**
   * The client address of an HTTP request: the one every per-IP limit, the audit log and the
   * request log use. From one of our proxies, X-Forwarded-For is read from the right: each proxy
   * appends the address it got the request from, so the right-most address that is not itself
   * one of our proxies is the client, and whatever stands left of it was written by that client
   * and may be forged (the standard rule, proxy-addr's, as in Express). From any other peer the
   * header is ignored: the client is the TCP peer.
   */
  clientAddress(req: IncomingMessage): string {
    const peer = req.socket.remoteAddress;
    if (peer === undefined) return 'unknown';
    if (!this.includes(peer)) return peer;
    // [peer, our proxies right to left…, the client]
    const hops = proxyAddr.all(req, this.trust);
    const client = hops[hops.length - 1];
    // An entry that is no address (a proxy passing "unknown" on) names no client: the proxy that wrote it is the last one known.
    return net.isIP(client) !== 0 ? client : hops[hops.length - 2];
  }
}
