/**
 * http.redirect_plain (docs/tls.md): GET and HEAD without credentials are redirected to HTTPS; anything else is 403
 * unread, since a redirect would only send an exposed key a second time. Also answers ACME http-01 (RFC 8555 §8.3).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import type { Logger } from '../log.js';
import { countHttpRequest, countRefusal } from '../platform/metrics.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import type { AcmeChallenges } from '../tls/acmeChallenges.js';
import { createListenerServer } from '../tls/httpsListener.js';
import { requestAddresses, timeoutCheckInterval } from './app.js';
import { type ConnectionLimiter, OVER_CONNECTION_CAP } from './connectionLimit.js';
import { loggedPath } from './requestPath.js';
import { sendError } from './respond.js';

export interface PlainListenerDeps {
  config: Pick<PosternConfig, 'http'>;
  logger: Logger;
  connections: ConnectionLimiter;
  proxies: TrustedProxies;
  httpsPort: () => number;
  challenges: AcmeChallenges | null;
}

const CHALLENGE_PREFIX = '/.well-known/acme-challenge/';
/** A host name, an IPv4 address, or an IPv6 literal in brackets; then an optional port. */
const HOST_HEADER = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}))(?::\d{1,5})?$/;

export function createPlainListener(deps: PlainListenerDeps, name: string): Server {
  const { config, connections, proxies } = deps;
  const log = deps.logger.child({ listener: name });

  const refuse = (res: ServerResponse, location: string | null) => {
    countRefusal('http', 'https_required');
    const where = location ? ` Send it to ${location}.` : '';
    const err = new ContractError('https_required', {
      message: `This address is plain HTTP and processes nothing: the request was not read.${where} An API key sent here travelled unencrypted: consider it exposed and rotate it.`,
    });
    // Nothing of the body is read: the connection is closed once answered.
    sendError(res, err, { Connection: 'close' });
  };

  const answerChallenge = async (token: string, res: ServerResponse, head: boolean) => {
    const answer = await deps.challenges!.httpAnswer(token);
    if (answer === null)
      return sendError(res, new ContractError('not_found', { message: 'No such ACME challenge.' }));
    res.writeHead(200, {
      'Content-Type': 'application/octet-stream',
      'Content-Length': Buffer.byteLength(answer),
      'Cache-Control': 'no-store',
    });
    res.end(head ? undefined : answer);
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const path = loggedPath(req.url);
    const credentials = req.headers.authorization !== undefined;
    res.once('close', () => {
      const line = {
        method: req.method,
        path,
        status: res.statusCode,
        ...requestAddresses(req, proxies),
        ...(credentials ? { credentials_in_clear: true } : {}),
      };
      if (res.writableFinished)
        countHttpRequest(
          'plain',
          path.startsWith(CHALLENGE_PREFIX) ? CHALLENGE_PREFIX : 'other',
          res.statusCode,
        );
      // A key sent in clear is worth a warning (never the key itself).
      if (credentials)
        log.warn(line, 'a request with credentials came over plain HTTP; it was refused unread');
      else log.info(line, 'plain HTTP request');
    });
    if (connections.isRefused(req.socket)) return sendError(res, OVER_CONNECTION_CAP);
    const method = req.method ?? '';
    const url = req.url ?? '/';
    const readOnly = method === 'GET' || method === 'HEAD';
    if (readOnly && deps.challenges && url.startsWith(CHALLENGE_PREFIX) && !credentials) {
      answerChallenge(url.slice(CHALLENGE_PREFIX.length), res, method === 'HEAD').catch(
        (err: unknown) => {
          log.error({ err }, 'reading an ACME challenge failed');
          sendError(res, new ContractError('server_error', { message: 'Internal error.' }));
        },
      );
      return;
    }
    const location = httpsLocation(req.headers.host, deps.httpsPort(), url);
    if (!readOnly || credentials || location === null) return refuse(res, location);
    res.writeHead(308, { Location: location, 'Content-Length': 0 });
    res.end();
  };

  const server = createListenerServer(
    {
      requestTimeout: config.http.request_timeout_ms,
      headersTimeout: config.http.headers_timeout_ms,
      connectionsCheckingInterval: timeoutCheckInterval(config.http),
    },
    onRequest,
    null,
  );
  connections.watch(server);
  server.keepAliveTimeout = config.http.keep_alive_timeout_ms;
  return server;
}

/** null when the Host header is missing or malformed. */
export function httpsLocation(
  host: string | undefined,
  httpsPort: number,
  url: string,
): string | null {
  if (!host || !HOST_HEADER.test(host) || !url.startsWith('/')) return null;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
  return `https://${name}${httpsPort === 443 ? '' : `:${httpsPort}`}${url}`;
}
