import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import polka from 'polka';
import type { AcceptPipeline } from '../accept/acceptMessage.js';
import { acceptBatch } from '../accept/acceptBatch.js';
import { checkMessageBody } from '../accept/messageRules.js';
import { toOutgoingMessage } from '../accept/outgoingMessage.js';
import type { Clock } from '../clock.js';
import type { ListenerConfig, PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import { openapiDocument, validateBatchEnvelope } from '../contract/validators.js';
import type { Logger } from '../log.js';
import type { Admission, Route } from '../policy/admission.js';
import type { AuthContext } from '../policy/apiKeys.js';
import { sql, type Db } from '../store/db.js';
import { createFeedbackHandler } from './feedbackRoute.js';
import { readJsonBody } from './jsonBody.js';
import { sendError, sendJson } from './respond.js';
import type { Viewer } from '../viewer/route.js';

export interface HttpDeps {
  db: Db;
  pipeline: AcceptPipeline;
  admission: Admission;
  clock: Clock;
  logger: Logger;
  config: PosternConfig;
  /** The public viewer (GET /view/…), shared by every HTTP listener. */
  viewer?: Viewer;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

const openapiBody = JSON.stringify(openapiDocument);

/** One HTTP listener: the customer API for one environment, plus /healthz and /openapi.json. */
export function createHttpServer(deps: HttpDeps, listener: ListenerConfig): Server {
  const { db, pipeline, admission, clock, logger, config } = deps;
  const environment = listener.environment;
  const log = logger.child({ listener: listener.name });

  // Authentication, then rate limits (see Admission); both before the body is read.
  const admit = (req: IncomingMessage, route: Route): AuthContext =>
    admission.admit(req.socket.remoteAddress ?? 'unknown', req.headers.authorization, environment, route);

  const guarded =
    (handler: Handler) =>
    (req: IncomingMessage, res: ServerResponse): void => {
      handler(req, res).catch((err: unknown) => {
        if (err instanceof ContractError) {
          sendError(res, err);
        } else {
          log.error({ err }, 'unhandled error in request');
          sendError(res, new ContractError('server_error', { message: 'Internal error; nothing was accepted.' }));
        }
      });
    };

  const send: Handler = async (req, res) => {
    const context = admit(req, 'send');
    const idempotencyKey = headerValue(req, 'idempotency-key');
    const accepted = await pipeline.idempotent(context, idempotencyKey, async () => {
      const body = await readJsonBody(req, config.http.max_body_bytes);
      const check = checkMessageBody(body, clock.now());
      if (!check.ok) throw ContractError.validation(check.details);
      return pipeline.accept(context, toOutgoingMessage(check.message), { source: 'http', idempotencyKey });
    });
    sendJson(res, 202, accepted);
  };

  const sendBatch: Handler = async (req, res) => {
    const context = admit(req, 'batch');
    const body = await readJsonBody(req, config.http.max_batch_body_bytes);
    const envelope = validateBatchEnvelope(body);
    if (!envelope.ok) throw ContractError.validation(envelope.details);
    const data = await acceptBatch(pipeline, context, envelope.value.messages, clock);
    sendJson(res, 207, { data });
  };

  const feedback = createFeedbackHandler({ db, admission, clock, logger: log, config }) as Handler;

  const methodNotAllowed = (allow: string) => (_req: IncomingMessage, res: ServerResponse) =>
    sendError(res, new ContractError('method_not_allowed'), { Allow: allow });

  const app = polka({
    onNoMatch: (_req, res) => sendError(res, new ContractError('not_found')),
    onError: (err, _req, res) => {
      log.error({ err }, 'request pipeline error');
      sendError(res, new ContractError('server_error', { message: 'Internal error; nothing was accepted.' }));
    },
  });

  app
    .get('/healthz', (_req, res) => {
      const ok = sql(db, 'SELECT 1').pluck().get() === 1;
      sendJson(res, ok ? 200 : 503, { status: ok ? 'ok' : 'unavailable', environment });
    })
    .get('/openapi.json', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(openapiBody) });
      res.end(openapiBody);
    })
    .post('/v1/send', guarded(send))
    .post('/v1/send/batch', guarded(sendBatch))
    .post('/v1/feedback/:account', guarded(feedback))
    .post('/v1/feedback/:account/:token', guarded(feedback))
    .all('/v1/send', methodNotAllowed('POST'))
    .all('/v1/send/batch', methodNotAllowed('POST'));
  if (deps.viewer) app.get('/view/:id/:token', deps.viewer.page).get('/view/:id/:token/body', deps.viewer.body);

  const server = createServer({ requestTimeout: config.http.request_timeout_ms, headersTimeout: config.http.headers_timeout_ms }, (req, res) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      log.info(
        { method: req.method, path: viewerMasked(req.url?.split('?')[0]), status: res.statusCode, ms: Number(process.hrtime.bigint() - started) / 1e6, ip: req.socket.remoteAddress },
        'request',
      );
    });
    (app.handler as (req: IncomingMessage, res: ServerResponse) => void)(req, res);
  });
  server.keepAliveTimeout = config.http.keep_alive_timeout_ms;
  return server;
}

/** A viewer link's token is a credential: never logged. */
function viewerMasked(path: string | undefined): string | undefined {
  return path?.replace(/^(\/view\/[^/]+\/)[^/]+/, '$1***');
}

function headerValue(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(',') : v;
}
