import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import polka from 'polka';
import { acceptBatch } from '../accept/acceptBatch.js';
import type { AcceptPipeline } from '../accept/acceptMessage.js';
import { checkMessageBody } from '../accept/messageRules.js';
import { type OutgoingMessage, toOutgoingMessage } from '../accept/outgoingMessage.js';
import type { Clock } from '../clock.js';
import type { ListenerConfig, PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import { openapiDocument } from '../contract/openapiSchemas.js';
import { validateBatchEnvelope } from '../contract/validators.js';
import type { FeedbackIntake } from '../delivery/feedback.js';
import type { Logger } from '../log.js';
import type { InflightBudget } from '../platform/inflightBudget.js';
import { countHttpRequest, countRefusal } from '../platform/metrics.js';
import type { Readiness } from '../platform/readiness.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import type { Admission, Route } from '../policy/admission.js';
import type { AuthContext } from '../policy/apiKeys.js';
import { createListenerServer, type ListenerTls } from '../tls/httpsListener.js';
import type { Viewer } from '../viewer/route.js';
import { type ConnectionLimiter, OVER_CONNECTION_CAP } from './connectionLimit.js';
import { createFeedbackHandler } from './feedbackRoute.js';
import { readJsonBody } from './jsonBody.js';
import { closingConnection, refusalAnswer } from './refusedBody.js';
import { ClientGone } from './requestBody.js';
import { exactRoute, isCanonicalTarget, loggedPath } from './requestPath.js';
import { sendJson } from './respond.js';

export interface HttpDeps {
  feedback: FeedbackIntake;
  pipeline: AcceptPipeline;
  admission: Admission;
  clock: Clock;
  logger: Logger;
  config: Pick<PosternConfig, 'http' | 'feedback'>;
  viewer?: Viewer;
  /** Shared by every HTTP listener: the connection caps and the memory budget of bodies. */
  connections: ConnectionLimiter;
  bodyBudget: InflightBudget;
  proxies: TrustedProxies;
  /** None: 200 when the index answers, as /healthz. */
  readiness?: Readiness;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

const openapiBody = JSON.stringify(openapiDocument);

/** Node's default check interval, 30 s, let a 30 s headers timeout fire after up to 60 s. */
export function timeoutCheckInterval(config: PosternConfig['http']): number {
  return Math.max(
    100,
    Math.min(1000, Math.floor(Math.min(config.headers_timeout_ms, config.request_timeout_ms) / 10)),
  );
}

/** The others have an id or a secret in their path. */
const COUNTED_PATHS = new Set([
  '/v1/send',
  '/v1/send/batch',
  '/healthz',
  '/readyz',
  '/openapi.json',
]);

export function routeLabel(path: string): string {
  if (COUNTED_PATHS.has(path)) return path;
  if (path.startsWith('/v1/feedback/')) return '/v1/feedback';
  return 'other';
}

/** One HTTP listener: the customer API for one environment, plus /healthz and /openapi.json. */
export function createHttpServer(
  deps: HttpDeps,
  listener: ListenerConfig,
  tls: ListenerTls | null = null,
): Server {
  const {
    feedback: intake,
    pipeline,
    admission,
    clock,
    logger,
    config,
    connections,
    bodyBudget,
    proxies,
  } = deps;
  const environment = listener.environment;
  const log = logger.child({ listener: listener.name });
  const refuse = refusalAnswer({
    bytes: config.http.refused_body_drain_bytes,
    ms: config.http.refused_body_drain_ms,
  });

  // Authentication, then rate limits; both before the body is read.
  const admit = (req: IncomingMessage, route: Route): Promise<AuthContext> =>
    admission.admit(proxies.clientAddress(req), req.headers.authorization, environment, route);

  const guarded =
    (handler: Handler) =>
    (req: IncomingMessage, res: ServerResponse): void => {
      handler(req, res).catch((err: unknown) => {
        // Nobody to answer; the request line (aborted: true) says what happened.
        if (err instanceof ClientGone) return;
        if (err instanceof ContractError) {
          countRefusal('http', err.code);
          refuse(res, err);
        } else {
          log.error({ err }, 'unhandled error in request');
          refuse(
            res,
            new ContractError('server_error', { message: 'Internal error; nothing was accepted.' }),
          );
        }
      });
    };

  /** The parsed JSON is garbage once this returns. */
  const readMessage = async (
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<OutgoingMessage> => {
    const body = await readJsonBody(req, res, {
      limit: config.http.max_body_bytes,
      budget: bodyBudget,
      envelope: 'message',
    });
    const check = checkMessageBody(body.value, clock.now(), { undecodable: body.undecodable });
    if (!check.ok) throw ContractError.validation(check.details);
    return toOutgoingMessage(check.message);
  };

  const send: Handler = async (req, res) => {
    const context = await admit(req, 'send');
    pipeline.checkDiskSpace();
    const idempotencyKey = headerValue(req, 'idempotency-key');
    const accepted = await pipeline.idempotent(context, idempotencyKey, async () =>
      pipeline.accept(context, await readMessage(req, res), { source: 'http', idempotencyKey }),
    );
    sendJson(res, 202, accepted);
  };

  const sendBatch: Handler = async (req, res) => {
    const context = await admit(req, 'batch');
    pipeline.checkDiskSpace();
    const body = await readJsonBody(req, res, {
      limit: config.http.max_batch_body_bytes,
      budget: bodyBudget,
      envelope: 'batch',
    });
    const envelope = validateBatchEnvelope(body.value);
    if (!envelope.ok) throw ContractError.validation(envelope.details);
    const data = await acceptBatch(pipeline, context, envelope.value.messages, clock, {
      undecodable: body.undecodable,
    });
    for (const item of data) if ('error' in item) countRefusal('http', item.error.code);
    sendJson(res, 207, { data });
  };

  const feedback = createFeedbackHandler({
    feedback: intake,
    admission,
    clock,
    logger: log,
    config,
    bodyBudget,
    proxies,
  }) as Handler;

  const methodNotAllowed = (allow: string) => (_req: IncomingMessage, res: ServerResponse) =>
    refuse(res, new ContractError('method_not_allowed'), { Allow: allow });

  const app = polka({
    onNoMatch: (_req, res) => refuse(res, new ContractError('not_found')),
    onError: (err, _req, res) => {
      log.error({ err }, 'request pipeline error');
      refuse(
        res,
        new ContractError('server_error', { message: 'Internal error; nothing was accepted.' }),
      );
    },
  });

  // Exact routes, case-sensitive, no trailing slash: a path is served in one spelling only (requestPath.ts).
  app
    .get(exactRoute('/healthz'), (_req, res) => {
      void pipeline.indexAnswers().then(
        (ok) => sendJson(res, ok ? 200 : 503, { status: ok ? 'ok' : 'unavailable', environment }),
        () => sendJson(res, 503, { status: 'unavailable', environment }),
      );
    })
    .get(exactRoute('/readyz'), (_req, res) => {
      if (!deps.readiness) {
        void pipeline.indexAnswers().then(
          (ok) =>
            sendJson(res, ok ? 200 : 503, {
              status: ok ? 'ready' : 'not_ready',
              failing: ok ? [] : ['index'],
              checks: { index: { ok } },
            }),
          () =>
            sendJson(res, 503, {
              status: 'not_ready',
              failing: ['index'],
              checks: { index: { ok: false } },
            }),
        );
        return;
      }
      deps.readiness.report().then(
        (report) => sendJson(res, report.status === 'ready' ? 200 : 503, report),
        () => sendJson(res, 503, { status: 'not_ready', failing: ['readiness'], checks: {} }),
      );
    })
    .get(exactRoute('/openapi.json'), (_req, res) => {
      res.writeHead(200, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(openapiBody),
      });
      res.end(openapiBody);
    })
    .post(exactRoute('/v1/send'), guarded(send))
    .post(exactRoute('/v1/send/batch'), guarded(sendBatch))
    .post(exactRoute('/v1/feedback/:account'), guarded(feedback))
    .post(exactRoute('/v1/feedback/:account/:token'), guarded(feedback))
    .all(exactRoute('/v1/send'), methodNotAllowed('POST'))
    .all(exactRoute('/v1/send/batch'), methodNotAllowed('POST'));
  if (deps.viewer)
    app
      .get(exactRoute('/view/:id/:token'), deps.viewer.page)
      .get(exactRoute('/view/:id/:token/body'), deps.viewer.body)
      .get(exactRoute('/view/:id/:token/inline/:index'), deps.viewer.inline);

  const server = createListenerServer(
    {
      requestTimeout: config.http.request_timeout_ms,
      headersTimeout: config.http.headers_timeout_ms,
      connectionsCheckingInterval: timeoutCheckInterval(config.http),
    },
    (req, res) => {
      // A request behind a refused body, on a connection its answer closed: not served.
      if (closingConnection(req)) return void req.socket.destroy();
      const started = process.hrtime.bigint();
      const path = loggedPath(req.url);
      res.once('close', () => {
        const line = {
          method: req.method,
          path,
          status: res.statusCode,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
          ...requestAddresses(req, proxies),
        };
        if (res.writableFinished) countHttpRequest('send', routeLabel(path), res.statusCode);
        if (res.writableFinished) log.info(line, 'request');
        else log.info({ ...line, status: null, aborted: true }, 'request aborted by the client');
      });
      if (connections.isRefused(req.socket)) {
        countRefusal('http', OVER_CONNECTION_CAP.code);
        return refuse(res, OVER_CONNECTION_CAP);
      }
      if (!isCanonicalTarget(req.url)) return refuse(res, new ContractError('not_found'));
      (app.handler as (req: IncomingMessage, res: ServerResponse) => void)(req, res);
    },
    tls,
  );
  connections.watch(server);
  server.keepAliveTimeout = config.http.keep_alive_timeout_ms;
  return server;
}

/** `proxy`, the TCP peer, only when a trusted proxy forwarded the request. */
export function requestAddresses(
  req: IncomingMessage,
  proxies: TrustedProxies,
): { ip: string; proxy?: string } {
  const ip = proxies.clientAddress(req);
  const peer = req.socket.remoteAddress;
  return peer === undefined || peer === ip ? { ip } : { ip, proxy: peer };
}

function headerValue(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(',') : v;
}
