import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { ContractError } from '../contract/errors.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';

/** Refusals still waiting for their request; beyond this many, excess connections are closed at once. */
export const MAX_PENDING_REFUSALS = 64;
/** How long a refused connection may take to send the request its 503 answers. */
export const REFUSAL_WAIT_MS = 2000;

/** The answer to the request of a connection over a cap. */
export const OVER_CONNECTION_CAP = new ContractError('server_busy', {
  message: 'Too many open connections; nothing was accepted. Retry in 1 second.',
  headers: { 'Retry-After': '1', Connection: 'close' },
});

/**
 * Caps the open connections of every HTTP listener together (`http.max_connections`) and per
 * client address (`http.max_connections_per_ip`), so idle clients cannot take every file
 * descriptor the process may open (the spool, the index and the SMTP door need them too).
 *
 * A connection over a cap is not served: its first request is answered `503 server_busy` with
 * `Retry-After` and `Connection: close` (see app.ts), and it is closed after REFUSAL_WAIT_MS if
 * it sends none. Those refusals are bounded as well: while MAX_PENDING_REFUSALS are pending,
 * further excess connections are closed at once without an answer. So the descriptors the HTTP
 * door holds never exceed `max_connections + MAX_PENDING_REFUSALS`.
 *
 * A connection is counted when it opens, before any request on it is read, so by its TCP peer:
 * X-Forwarded-For plays no part here. A peer in `http.trusted_proxies` (a load balancer, which
 * carries many clients over its connections) is held to `max_connections` only.
 */
export class ConnectionLimiter {
  private open = 0;
  private pendingRefusals = 0;
  private readonly perIp = new Map<string, number>();
  /**
   * Refused connections by their address pair, not by socket: behind TLS (the console's HTTPS
   * listener) a request's socket is the TLS socket wrapping the one counted here, with the
   * same addresses.
   */
  private readonly refused = new Set<string>();

  constructor(
    private readonly max: number,
    private readonly maxPerIp: number,
    /** `http.trusted_proxies`: held to `max` only. */
    private readonly proxies: TrustedProxies,
  ) {}

  /** Counts `server`'s connections from now on (before its HTTP parser sees them). */
  watch(server: Server): void {
    server.prependListener('connection', (socket: Socket) => this.admit(socket));
  }

  /** True for a connection over a cap: its request is answered 503 and it is closed. */
  isRefused(socket: Socket): boolean {
    return this.refused.has(peerKey(socket));
  }

  private admit(socket: Socket): void {
    const ip = socket.remoteAddress ?? 'unknown';
    const proxy = this.proxies.includes(ip);
    if (this.open < this.max && (proxy || (this.perIp.get(ip) ?? 0) < this.maxPerIp)) {
      this.count(socket, proxy ? null : ip);
      return;
    }
    if (this.pendingRefusals >= MAX_PENDING_REFUSALS) {
      socket.destroy();
      return;
    }
    this.pendingRefusals++;
    const key = peerKey(socket);
    this.refused.add(key);
    const timer = setTimeout(() => socket.destroy(), REFUSAL_WAIT_MS);
    timer.unref();
    socket.once('close', () => {
      this.pendingRefusals--;
      this.refused.delete(key);
      clearTimeout(timer);
    });
  }

  /** An admitted connection, counted until it closes (per address too, unless `ip` is null: a trusted proxy). */
  private count(socket: Socket, ip: string | null): void {
    this.open++;
    if (ip !== null) this.perIp.set(ip, (this.perIp.get(ip) ?? 0) + 1);
    socket.once('close', () => {
      this.open--;
      if (ip === null) return;
      const left = (this.perIp.get(ip) ?? 1) - 1;
      if (left > 0) this.perIp.set(ip, left);
      else this.perIp.delete(ip);
    });
  }
}

/** One TCP connection's address pair (unique while it is open). */
const peerKey = (socket: Socket): string => `${socket.localAddress}:${socket.localPort}|${socket.remoteAddress}:${socket.remotePort}`;
