import type { Socket } from 'node:net';
import type { SMTPServer } from 'smtp-server';
import type { Logger } from '../log.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';

/**
 * PROXY protocol v1 behind a load balancer: smtp-server's own proxy list matches exact addresses only, so whether a header
 * is expected is answered here from `trusted_proxies` (CIDRs too). A bad header is logged here: the library says nothing.
 */
export function readProxyHeaders(server: SMTPServer, proxies: TrustedProxies, log: Logger): void {
  server._expectsProxyHeader = (socket: Socket) => proxies.includes(socket.remoteAddress);
  const handle = server._handleProxy.bind(server);
  server._handleProxy = (socket, callback) => {
    const proxy = socket.remoteAddress;
    handle(socket, (err, options) => {
      // The library's "* BAD" line: no valid header (no send-proxy?). Otherwise the balancer left first, as TCP health checks do.
      if (err && socket.writableEnded)
        log.warn(
          { proxy, reason: err.message },
          'SMTP connection refused: no valid PROXY protocol header from the load balancer',
        );
      else if (err)
        log.debug(
          { proxy, reason: err.message },
          'SMTP connection closed before its PROXY protocol header',
        );
      callback(err, options);
    });
  };
}
