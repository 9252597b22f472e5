import os from 'node:os';
import type { Readable } from 'node:stream';
import { SMTPServer, type SMTPServerAuthentication, type SMTPServerSession } from 'smtp-server';
import type { AcceptPipeline } from '../accept/acceptMessage.js';
import type { Clock } from '../clock.js';
import type { ListenerConfig, PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import type { Logger } from '../log.js';
import { MessageOverSize } from '../mime/ingest.js';
import type { InflightBudget } from '../platform/inflightBudget.js';
import { countRefusal } from '../platform/metrics.js';
import { TrustedProxies } from '../platform/trustedProxies.js';
import type { Admission } from '../policy/admission.js';
import { type AuthContext, KEY_PATTERN } from '../policy/apiKeys.js';
import type { ServedCertificate } from '../tls/servedCertificate.js';
import { readWholeUpTo } from './dataPayload.js';
import { listenerOptions } from './listenerOptions.js';
import { coalesceReplies, type LiveConnection, liveConnections } from './liveConnection.js';
import { readProxyHeaders } from './proxyProtocol.js';
import { isSmtpReply, replyForUnknown, smtpError } from './replies.js';
import { sweepSessions } from './sessionLifetime.js';
import { roomToStream, SessionGone } from './streamedMessages.js';
import './commandLineLength.js';
import './greetingDelay.js';
import './replyCode.js';
import './unauthenticatedCommands.js';
import './authAttempts.js';

export interface SmtpDeps {
  pipeline: AcceptPipeline;
  admission: Admission;
  clock: Clock;
  logger: Logger;
  config: Pick<PosternConfig, 'smtp'>;
  streams: InflightBudget;
}

interface SessionState {
  started: number;
  /** The TCP peer's, or behind a load balancer the one its PROXY header names. */
  ip: string;
  authFailures: number;
  messages: number;
  /** The AUTH password (the API key), re-checked at every MAIL FROM: a revoked key stops at once. */
  key: string | null;
}

export interface PosternSmtpServer {
  server: SMTPServer;
  listen(): Promise<number>;
  close(): Promise<void>;
  openSessions(): number;
  listening(): boolean;
}

/** One SMTP listener (smtp-server) in front of the accept pipeline (docs/smtp.md). */
export function createSmtpServer(
  deps: SmtpDeps,
  listener: ListenerConfig,
  certificate: ServedCertificate,
): PosternSmtpServer {
  const { pipeline, admission, clock, logger, config, streams } = deps;
  const limits = config.smtp;
  const environment = listener.environment;
  const log = logger.child({ listener: listener.name });
  const sessions = new Map<string, SessionState>();
  const perIp = new Map<string, number>();
  const proxies = listener.proxy_protocol ? new TrustedProxies(listener.trusted_proxies) : null;
  let closing = false;
  const refusal = (err: unknown) => {
    if (err instanceof ContractError) countRefusal('smtp', err.code);
    return replyForUnknown(err);
  };

  const connectionOf = (session: SMTPServerSession): LiveConnection | undefined => {
    for (const c of liveConnections(server)) if (c.session === session) return c;
    return undefined;
  };
  const drop = (session: SMTPServerSession, text: string) =>
    setImmediate(() => {
      const c = connectionOf(session);
      if (!c) return;
      c.send(421, text);
      c.close();
    });

  /** An AUTH exchange ended refused, by onAuth or by smtp-server itself; true once the session is to be closed. */
  const authRefused = (session: SMTPServerSession): boolean => {
    const state = sessions.get(session.id);
    if (!state) return false;
    state.authFailures++;
    return state.authFailures >= limits.auth_failures_before_disconnect;
  };

  const server: SMTPServer = new SMTPServer({
    ...listenerOptions(listener, certificate, limits, proxies !== null),
    ...{ onAuthRefused: authRefused },

    onConnect(session, callback) {
      const ip = session.remoteAddress;
      if (closing) return callback(smtpError(421, 'Server shutting down'));
      const connection = connectionOf(session);
      // The PROXY header is trusted only from the balancer; anyone else could claim any address.
      const peer = connection?._socket?.remoteAddress;
      if (proxies && !proxies.includes(peer)) {
        log.info({ peer }, 'SMTP connection refused: not from a trusted proxy');
        return callback(
          smtpError(
            421,
            'This listener takes connections only from its load balancer (PROXY protocol)',
          ),
        );
      }
      const count = perIp.get(ip) ?? 0;
      if (count >= limits.max_clients_per_ip)
        return callback(smtpError(421, `Too many connections from ${ip}`));
      // A spent keyless window never holds back a valid key (docs/smtp.md); a bad key is refused in onAuth.
      perIp.set(ip, count + 1);
      sessions.set(session.id, {
        started: clock.now(),
        ip,
        authFailures: 0,
        messages: 0,
        key: null,
      });
      if (connection) coalesceReplies(connection);
      // AUTH is not offered until the connection is encrypted (onSecure lifts this).
      if (listener.tls !== 'implicit') session.disabledCommands = ['AUTH'];
      callback();
    },

    onSecure(_socket, session, callback) {
      session.disabledCommands = [];
      callback();
    },

    onClose(session) {
      const state = sessions.get(session.id);
      if (!state) return;
      sessions.delete(session.id);
      const left = (perIp.get(state.ip) ?? 1) - 1;
      if (left <= 0) perIp.delete(state.ip);
      else perIp.set(state.ip, left);
    },

    onAuth(auth: SMTPServerAuthentication, session, callback) {
      const state = sessions.get(session.id)!;
      const key =
        typeof auth.password === 'string' && KEY_PATTERN.test(auth.password) ? auth.password : null;
      admission.authenticateClient(state.ip, key, environment).then(
        (context) => {
          state.key = key;
          callback(null, { user: context });
        },
        (err: unknown) => {
          const reply = refusal(err);
          const failures = state.authFailures + 1;
          if (failures >= limits.auth_failures_before_disconnect) return callback(reply);
          const delay =
            Math.max(0, failures - limits.auth_failures_before_delay) *
            limits.auth_failure_delay_ms;
          if (delay === 0) callback(reply);
          else setTimeout(() => callback(reply), delay).unref();
        },
      );
    },

    onMailFrom(_address, session, callback) {
      const state = sessions.get(session.id)!;
      // smtp-server only checks this itself while AUTH is offered, i.e. after TLS.
      if (!session.user || state.key === null) {
        return callback(
          smtpError(
            530,
            'Authentication required: STARTTLS, then AUTH PLAIN or LOGIN with your API key as the password',
          ),
        );
      }
      if (state.messages >= limits.max_messages_per_session) {
        callback(smtpError(421, 'Too many messages in one session; reconnect'));
        drop(session, 'Too many messages in one session');
        return;
      }
      // Fresh on every message: revocation, expiry and project pause apply mid-session.
      admission
        .readmit(state.key, environment, 'send')
        .then((context) => {
          session.user = context as unknown as string;
          // Low on disk: refused before the client uploads the message (452 4.3.1).
          pipeline.checkDiskSpace();
        })
        .then(
          () => callback(),
          (err: unknown) => callback(refusal(err)),
        );
    },

    onData(stream: Readable, session, callback) {
      const state = sessions.get(session.id)!;
      state.messages++;
      const auth = session.user as unknown as AuthContext;
      receive(stream, session, auth)
        .then((id) => callback(null, `OK queued as ${id}`))
        .catch((err: unknown) => {
          const reply = refusal(err);
          if (err instanceof SessionGone)
            log.debug({ err, ip: state.ip }, 'SMTP message not accepted');
          else if (err instanceof ContractError || isSmtpReply(err)) {
            log.info(
              {
                ip: state.ip,
                session: session.id,
                reply: reply.responseCode,
                code: err instanceof ContractError ? err.code : undefined,
              },
              'SMTP message refused',
            );
          } else log.error({ err, ip: state.ip }, 'SMTP message not accepted');
          stream.unpipe();
          stream.resume();
          callback(reply);
        });
    },
  });

  async function receive(
    stream: Readable,
    session: SMTPServerSession,
    auth: AuthContext,
  ): Promise<string> {
    // Small messages are held whole; big ones streamed to disk once there is room (roomToStream).
    const received = await readWholeUpTo(
      stream,
      Math.min(limits.in_memory_message_bytes, limits.max_message_bytes),
    );
    const lease =
      'stream' in received
        ? await roomToStream(streams, received.stream, () => connectionOf(session))
        : null;
    try {
      const accepted = await pipeline.acceptReceived(auth, received, {
        recipients: session.envelope.rcptTo.map((r) => r.address),
        maxBytes: limits.max_message_bytes,
        defaultSender: `postern@${limits.hostname ?? os.hostname()}`,
      });
      return accepted.id;
    } catch (err) {
      if (err instanceof MessageOverSize) throw smtpError(552, err.message);
      throw err;
    } finally {
      lease?.release();
    }
  }

  const sweep = sweepSessions(server, sessions, limits, clock);

  // Sessions in progress keep their certificate; new ones get the replaced one.
  certificate.onReplace((pair) => server.updateSecureContext({ key: pair.key, cert: pair.cert }));
  if (proxies) readProxyHeaders(server, proxies, log);
  server.on('error', (err) => log.warn({ err }, 'SMTP listener error'));

  return {
    server,
    listen: () =>
      new Promise<number>((resolve, reject) => {
        const onError = (err: Error) => reject(err);
        server.server.once('error', onError);
        server.listen(listener.port, listener.host, () => {
          server.server.off('error', onError);
          resolve((server.server.address() as { port: number }).port);
        });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        clearInterval(sweep);
        server.close(() => resolve());
      }),
    openSessions: () => sessions.size,
    listening: () => server.server.listening,
  };
}
