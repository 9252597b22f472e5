import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import proxyAddr from 'proxy-addr';

const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** Plain addresses only: proxy-addr would also read `127.1` or `0x7f000001`, which no config means. */
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

/** Only our own load balancers are believed about where a connection comes from (X-Forwarded-For, PROXY header). */
export class TrustedProxies {
  private readonly trust: (address: string, hop: number) => boolean;

  constructor(readonly entries: readonly string[]) {
    this.trust = proxyAddr.compile([...entries]);
  }

  /** An IPv4 peer of a dual-stack listener (`::ffff:a.b.c.d`) matches its IPv4 entry. */
  includes(address: string | undefined): boolean {
    return address !== undefined && this.entries.length > 0 && this.trust(address, 0);
  }

  /** X-Forwarded-For read from the right: the right-most address that is not one of our proxies (proxy-addr's rule); left of it may be forged. */
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
