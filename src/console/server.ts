import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import polka from 'polka';
import type { Clock } from '../clock.js';
import type { ConsoleListenerConfig, PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import { requestAddresses, timeoutCheckInterval } from '../http/app.js';
import { type ConnectionLimiter, OVER_CONNECTION_CAP } from '../http/connectionLimit.js';
import { closingConnection, refusalAnswer } from '../http/refusedBody.js';
import { ClientGone } from '../http/requestBody.js';
import { isCanonicalTarget, loggedPath, requestPath } from '../http/requestPath.js';
import { sendJson } from '../http/respond.js';
import type { Logger } from '../log.js';
import { ActivityTail } from '../operator/activity.js';
import { BulkReader } from '../operator/bulkReader.js';
import type { OperatorContext, OperatorSettings, OperatorWriter } from '../operator/context.js';
import { OperatorError } from '../operator/errors.js';
import type { KeyUseRecorder } from '../operator/keyUse.js';
import { StorageFigures } from '../operator/overview.js';
import { currentPrincipal } from '../operator/sessions.js';
import { METRICS_TEXT_TYPE, type MetricsExposition } from '../operator/stateMetrics.js';
import type { TargetOptions } from '../operator/webhookEndpoints.js';
import type { InflightBudget } from '../platform/inflightBudget.js';
import { countHttpRequest } from '../platform/metrics.js';
import type { Readiness } from '../platform/readiness.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import { createListenerServer, type ListenerTls } from '../tls/httpsListener.js';
import type { SignInThrottle } from './auth.js';
import type { AnonymousHandlers } from './call.js';
import { consoleDocument } from './document.js';
import { consoleHandlers, type HandlerDeps } from './handlers.js';
import { LiveEvents } from './liveEvents.js';
import { addApiRoutes } from './routes.js';
import { API_POLICY, WebApp } from './webApp.js';

export type ConsoleSettings = OperatorSettings & Pick<PosternConfig, 'http' | 'metrics' | 'store'>;

export interface ConsoleDeps {
  store: OperatorContext['store'];
  clock: Clock;
  logger: Logger;
  /** The sections the console reads (its operator context's, the listeners' HTTP limits, metrics, the store). */
  config: ConsoleSettings;
  spoolRoot: string;
  /** The index writer's channel for bulk writes. */
  writer: OperatorWriter;
  keyUse: KeyUseRecorder | null;
  /** The console listeners' connection caps (`console.max_connections`: apart from the send API's). */
  connections: ConnectionLimiter;
  /** Shared with the HTTP listeners: the memory budget of bodies. */
  bodyBudget: InflightBudget;
  /** What all the console listeners of the node share (consoleShared). */
  shared: ConsoleShared;
  /** `http.trusted_proxies`: sign-in throttling, the audit log and the request log see the client behind them. */
  proxies: TrustedProxies;
  /** The node's failed sign-in limits, one for all its console listeners. */
  signIns: SignInThrottle;
  /** The delivery scheduler's view of throttled provider accounts. */
  throttledUntil?: (accountId: string) => number | null;
  webhookTargets?: TargetOptions;
  viewerLinks: HandlerDeps['viewerLinks'];
  /** The send API's addresses, for the web app's examples. */
  doors?: () => { production: string | null; sandbox: string | null };
  /** GET /metrics (null: metrics.enabled is false, and the path is not found). */
  metrics?: MetricsExposition | null;
  /** GET /readyz. */
  readiness?: Readiness;
}

/** One per node, for all its console listeners. */
export interface ConsoleShared {
  /** Recent activity (the overview, the live feed), read from the outbox. */
  activity: ActivityTail;
  /** The live-update streams: capped per node, and a sign-out on one listener ends the streams of every other. */
  live: LiveEvents;
}

/** The node's console state: its activity tail and its live-update streams, each bound to the session or token that opened it. */
export function consoleShared(
  deps: Pick<ConsoleDeps, 'store' | 'clock' | 'logger' | 'config' | 'spoolRoot'>,
): ConsoleShared {
  const { store, clock, config } = deps;
  const activity = new ActivityTail(store, clock);
  const ctx: OperatorContext = { store, clock, config, spoolRoot: deps.spoolRoot };
  const idleMs = config.console.session_idle_seconds * 1000;
  const limits = {
    pollMs: config.console.events_poll_ms,
    checkMs: config.console.stream_check_ms,
    maxQueuedBytes: config.console.stream_max_queued_bytes,
    maxStreams: config.console.max_streams,
    maxStreamsPerOperator: config.console.max_streams_per_operator,
  };
  return {
    activity,
    live: new LiveEvents(activity, (p) => currentPrincipal(ctx, p, idleMs), limits, deps.logger),
  };
}

export interface ConsoleServer {
  server: Server;
  /** Ends the live-update streams (before the server is closed: they never end by themselves) and the bulk reader thread. */
  close(): Promise<void>;
}

const documentBody = JSON.stringify(consoleDocument);

/** An operator refusal in the contract's envelope: 404, 409, 403, or 422 with the field at fault. */
function contractErrorOf(err: OperatorError): ContractError {
  if (err.code === 'not_found') return new ContractError('not_found', { message: err.message });
  if (err.code === 'conflict') return new ContractError('conflict', { message: err.message });
  if (err.code === 'forbidden') return new ContractError('forbidden', { message: err.message });
  const field = err.field ?? 'body';
  return ContractError.validation(
    [{ field, code: `${field.split('.')[0]}:${err.reason}` }],
    err.message,
  );
}

/** The route a console request is counted under (postern_http_requests_total): never an id. */
function consoleRoute(path: string): string {
  if (path === '/metrics' || path === '/readyz') return path;
  return path.startsWith('/console/api/') ? '/console/api' : 'other';
}

/** Whether `header` is "Bearer <token>" (compared in constant time). */
function bearerMatches(header: string | undefined, token: string): boolean {
  const given = /^Bearer (.+)$/.exec(header ?? '')?.[1];
  if (given === undefined) return false;
  const digest = (v: string) => createHash('sha256').update(v).digest();
  return timingSafeEqual(digest(given), digest(token));
}

/** One console listener: the console API under /console/api/v1 (and, later, the web app); GET /metrics and GET /readyz. */
export function createConsoleServer(
  deps: ConsoleDeps,
  listener: ConsoleListenerConfig,
  tls: ListenerTls | null = null,
): ConsoleServer {
  const { store, clock, logger, config } = deps;
  const log = logger.child({ listener: listener.name });
  const refuse = refusalAnswer({
    bytes: config.http.refused_body_drain_bytes,
    ms: config.http.refused_body_drain_ms,
  });
  const secure = tls !== null;
  // SQLite: a bulk action's candidate scan blocks the thread that runs it, so a thread of its own;
  // PostgreSQL reads wait on the network, never on the event loop.
  const reader = config.store.backend === 'sqlite' ? new BulkReader(config.state_dir) : undefined;
  const base: OperatorContext = {
    store,
    clock,
    config,
    spoolRoot: deps.spoolRoot,
    writer: deps.writer,
    reader,
  };
  const { activity, live } = deps.shared;
  const handlers = consoleHandlers({
    ctx: base,
    secure,
    throttle: deps.signIns,
    live,
    overview: {
      activity,
      storage: new StorageFigures(store, config.state_dir),
      throttledUntil: deps.throttledUntil,
    },
    keyUse: deps.keyUse,
    webhookTargets: deps.webhookTargets,
    viewerLinks: deps.viewerLinks,
  });
  const anonymous: AnonymousHandlers = {
    ...handlers.anonymous,
    getOpenApi: () => ({ status: 200, body: JSON.parse(documentBody) }),
  };

  function fail(res: ServerResponse, err: unknown): void {
    // Nobody to answer; the request line (aborted) says what happened.
    if (err instanceof ClientGone) return;
    if (res.headersSent) {
      // A stream (raw MIME, attachment, CSV) broke off: the client sees a cut response.
      if (!(err instanceof ContractError || err instanceof OperatorError))
        log.warn({ err }, 'console response cut off');
      res.destroy();
      return;
    }
    if (err instanceof ContractError) refuse(res, err);
    else if (err instanceof OperatorError) refuse(res, contractErrorOf(err));
    else {
      log.error({ err }, 'unhandled error in console request');
      refuse(res, new ContractError('server_error', { message: 'Internal error.' }));
    }
  }

  const app = polka({
    onNoMatch: (_req, res) => refuse(res, new ContractError('not_found')),
    onError: (err, _req, res) => fail(res, err),
  });
  addApiRoutes(app, {
    base,
    config,
    proxies: deps.proxies,
    bodyBudget: deps.bodyBudget,
    authenticated: handlers.authenticated,
    anonymous,
    refuse,
    fail,
  });

  const web = new WebApp(deps.doors ?? (() => ({ production: null, sandbox: null })));
  /** GET /metrics: the Prometheus exposition, behind `metrics.token` when one is set. */
  async function serveMetrics(
    req: IncomingMessage,
    res: ServerResponse,
    metrics: MetricsExposition,
  ): Promise<void> {
    const token = config.metrics.token;
    if (token !== null && !bearerMatches(req.headers.authorization, token)) {
      return refuse(
        res,
        new ContractError('unauthenticated', {
          message: 'Send the metrics token as "Authorization: Bearer <token>" (metrics.token).',
        }),
        { 'WWW-Authenticate': 'Bearer' },
      );
    }
    const text = await metrics.text();
    res.writeHead(200, {
      'Content-Type': METRICS_TEXT_TYPE,
      'Content-Length': Buffer.byteLength(text),
    });
    res.end(text);
  }

  /** Paths outside the console API: /metrics and /readyz (GET only); false when the path is the API's. */
  function serveOperations(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    const metrics = path === '/metrics' ? deps.metrics : null;
    const readiness = path === '/readyz' ? deps.readiness : null;
    if (!metrics && !readiness) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      refuse(res, new ContractError('method_not_allowed'), { Allow: 'GET' });
      return true;
    }
    const served = metrics
      ? serveMetrics(req, res, metrics)
      : readiness!
          .report()
          .then((report) => sendJson(res, report.status === 'ready' ? 200 : 503, report));
    served.catch((err: unknown) => fail(res, err));
    return true;
  }

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    // A request behind a refused body, on a connection its answer closed: not served.
    if (closingConnection(req)) return void req.socket.destroy();
    const started = process.hrtime.bigint();
    // Operator data: never cached, never sniffed, never framed, no referrer; the web app's files set their own CSP.
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('Content-Security-Policy', API_POLICY);
    res.once('close', () => {
      const line = {
        method: req.method,
        path: loggedPath(req.url),
        status: res.statusCode,
        ms: Number(process.hrtime.bigint() - started) / 1e6,
        ...requestAddresses(req, deps.proxies),
      };
      if (res.writableFinished)
        countHttpRequest('console', consoleRoute(line.path), res.statusCode);
      if (res.writableFinished) log.info(line, 'console request');
      else
        log.info({ ...line, status: null, aborted: true }, 'console request aborted by the client');
    });
    if (deps.connections.isRefused(req.socket)) return refuse(res, OVER_CONNECTION_CAP);
    // Only the canonical spelling of a path is served; any other is unknown (the API, the web app, /metrics).
    if (!isCanonicalTarget(req.url)) return refuse(res, new ContractError('not_found'));
    if (serveOperations(req, res, requestPath(req.url))) return;
    if (web.serve(req, res)) return;
    (app.handler as (req: IncomingMessage, res: ServerResponse) => void)(req, res);
  };
  const options = {
    requestTimeout: config.http.request_timeout_ms,
    headersTimeout: config.http.headers_timeout_ms,
    connectionsCheckingInterval: timeoutCheckInterval(config.http),
  };
  const server = createListenerServer(options, onRequest, tls);
  deps.connections.watch(server);
  server.keepAliveTimeout = config.http.keep_alive_timeout_ms;
  return {
    server,
    close: async () => {
      live.close();
      await reader?.close();
    },
  };
}
