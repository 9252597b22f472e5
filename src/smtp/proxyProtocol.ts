import type { Socket } from 'node:net';
import type { SMTPServer } from 'smtp-server';
import type { Logger } from '../log.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';

/**
 * A listener behind a load balancer (`proxy_protocol: true`): smtp-server reads the PROXY
 * protocol v1 header (HAProxy `send-proxy`; it has no v2) before the SMTP session starts and
 * makes the client address it names the session's remoteAddress, which every per-IP limit and
 * log line then use. Its own list of proxies (`useProxy`) matches exact addresses only, so the
 * question it asks of each accepted socket, whether a header is expected from it, is answered
 * here from `trusted_proxies` (CIDRs too). A header that does not arrive or does not parse is
 * refused by the library (`* BAD Invalid PROXY header`, then closed); that is logged here, since
 * the library says nothing to us about a socket that never became a session. Connections from
 * any other address are refused by the listener at connect (server.ts, onConnect).
 */
export function readProxyHeaders(server: SMTPServer, proxies: TrustedProxies, log: Logger): void {
  server._expectsProxyHeader = (socket: Socket) => proxies.includes(socket.remoteAddress);
  const handle = server._handleProxy.bind(server);
  server._handleProxy = (socket, callback) => {
    const proxy = socket.remoteAddress;
    handle(socket, (err, options) => {
      // Ended by the library with its "* BAD" line: the balancer sent no valid header (no send-proxy?).
      // Otherwise the balancer left before sending one, as its TCP health checks do.
      if (err && socket.writableEnded) log.warn({ proxy, reason: err.message }, 'SMTP connection refused: no valid PROXY protocol header from the load balancer');
      else if (err) log.debug({ proxy, reason: err.message }, 'SMTP connection closed before its PROXY protocol header');
      callback(err, options);
    });
  };
}
