/** An HTTP listener's server: plain, or HTTPS with a certificate swapped in place, answering ACME TLS-ALPN-01 (RFC 8737). */
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { SecureContext, TLSSocket } from 'node:tls';
import type { AcmeChallenges } from './acmeChallenges.js';
import { HTTPS_MIN_VERSION, type ServedCertificate } from './servedCertificate.js';

export interface ListenerTls {
  certificate: ServedCertificate;
  challenges?: AcmeChallenges | null;
}

export const ACME_TLS_PROTOCOL = 'acme-tls/1';

/** ALPN and SNI are each seen once, in either order. */
interface HandshakeMarks {
  acmeTls?: boolean;
  certificateChosen?: boolean;
}
const marks = new WeakMap<TLSSocket, HandshakeMarks>();

function marksOf(socket: TLSSocket): HandshakeMarks {
  let m = marks.get(socket);
  if (!m) {
    m = {};
    marks.set(socket, m);
  }
  return m;
}

/** A connection keeps the certificate it started with. */
export function createListenerServer(
  options: ServerOptions,
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
  tls: ListenerTls | null,
): Server {
  if (!tls) return createServer(options, onRequest);
  const { certificate, challenges } = tls;
  const server = createHttpsServer(
    {
      ...options,
      cert: certificate.pair.cert,
      key: certificate.pair.key,
      minVersion: HTTPS_MIN_VERSION,
      // TLS 1.3 offers ALPN before the certificate is chosen (SNI); under TLS 1.2 acme-tls/1 is refused. ACME validators use TLS 1.3.
      ALPNCallback(
        this: TLSSocket,
        { protocols }: { servername: string; protocols: string[] },
      ): string | undefined {
        const m = marksOf(this);
        if (challenges && protocols.includes(ACME_TLS_PROTOCOL)) {
          if (m.certificateChosen) return undefined;
          m.acmeTls = true;
          return ACME_TLS_PROTOCOL;
        }
        return protocols.includes('http/1.1') ? 'http/1.1' : undefined;
      },
      SNICallback(
        this: TLSSocket,
        servername: string,
        callback: (err: Error | null, context?: SecureContext) => void,
      ): void {
        const m = marksOf(this);
        m.certificateChosen = true;
        if (!m.acmeTls || !challenges) {
          callback(null, certificate.context);
          return;
        }
        challenges.alpnContext(servername.toLowerCase()).then(
          (context) => callback(null, context ?? certificate.context),
          (err: unknown) => callback(err instanceof Error ? err : new Error(String(err))),
        );
      },
    },
    onRequest,
  );
  // Clients that send no server name get the server's default context: kept the served one.
  certificate.onReplace((pair) =>
    server.setSecureContext({ cert: pair.cert, key: pair.key, minVersion: HTTPS_MIN_VERSION }),
  );
  // A validation handshake is all an acme-tls/1 connection is for (RFC 8737 §3): no HTTP on it.
  server.prependListener('secureConnection', (socket: TLSSocket) => {
    if (socket.alpnProtocol === ACME_TLS_PROTOCOL) socket.destroy();
  });
  return server as unknown as Server;
}
