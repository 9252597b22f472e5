import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { ContractError } from '../contract/errors.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';

/** Beyond this many pending refusals, excess connections are closed at once. */
export const MAX_PENDING_REFUSALS = 64;
export const REFUSAL_WAIT_MS = 2000;

export const OVER_CONNECTION_CAP = new ContractError('server_busy', {
  message: 'Too many open connections; nothing was accepted. Retry in 1 second.',
  headers: { 'Retry-After': '1', Connection: 'close' },
});

/**
 * Caps open connections on every HTTP listener together and per client address, so idle clients cannot take every file
 * descriptor. Counted by TCP peer when it opens (X-Forwarded-For plays no part); a trusted proxy is held to `max` only.
 */
export class ConnectionLimiter {
  private open = 0;
  private pendingRefusals = 0;
  private readonly perIp = new Map<string, number>();
  /** By address pair, not socket: behind TLS a request's socket wraps the one counted here. */
  private readonly refused = new Set<string>();

  constructor(
    private readonly max: number,
    private readonly maxPerIp: number,
    private readonly proxies: TrustedProxies,
  ) {}

  watch(server: Server): void {
    server.prependListener('connection', (socket: Socket) => this.admit(socket));
  }

  /** Its request is answered 503 and it is closed. */
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

const peerKey = (socket: Socket): string =>
  `${socket.localAddress}:${socket.localPort}|${socket.remoteAddress}:${socket.remotePort}`;
