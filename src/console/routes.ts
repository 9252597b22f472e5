/**
 * The console API's routes: each operation of the document (document.ts) on its exact path, with
 * its handler (call.ts). A request is authenticated unless the document says none is needed, then
 * checked in the document's terms (path, password-change and owner rules, query, body); its
 * handler gets it typed by its own operation's request type.
 */
import type { ServerResponse } from 'node:http';
import type { Polka, Request as PolkaRequest } from 'polka';
import type { PosternConfig } from '../config/load.js';
import { asDetails, ContractError, type ErrorDetail } from '../contract/errors.js';
import { readJsonBody } from '../http/jsonBody.js';
import type { Refuse } from '../http/refusedBody.js';
import { exactRoute } from '../http/requestPath.js';
import { sendJson } from '../http/respond.js';
import type { OperatorContext } from '../operator/context.js';
import { actingAs } from '../operator/sessions.js';
import type { InflightBudget } from '../platform/inflightBudget.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import { type Authenticated, authenticateRequest } from './auth.js';
import {
  type AnonymousCall,
  type AnonymousHandlers,
  type AnonymousId,
  type Answer,
  type AuthenticatedHandlers,
  type AuthenticatedId,
  hasHandler,
} from './call.js';
import {
  type ConsoleOperation,
  compileOperation,
  declaredOperations,
  type OperationId,
} from './document.js';

/** Console request bodies are small (the largest: 10,000 message ids, a PEM key). */
const MAX_BODY_BYTES = 1024 * 1024;

const invalid = (details: ErrorDetail[]) =>
  ContractError.validation(asDetails(details, { field: 'body', code: 'body:invalid' }));

export interface ApiRoutes {
  /** The listener's operator context: a request acts for its principal, from its client's address. */
  base: OperatorContext;
  config: Pick<PosternConfig, 'console'>;
  proxies: TrustedProxies;
  /** The memory budget of request bodies. */
  bodyBudget: InflightBudget;
  authenticated: AuthenticatedHandlers;
  anonymous: AnonymousHandlers;
  refuse: Refuse;
  /** Answers (or cuts off) a request whose handling threw. */
  fail(res: ServerResponse, err: unknown): void;
}

type Respond = (req: PolkaRequest, res: ServerResponse) => Promise<Answer>;

/** Adds every operation of the document to `app`, and a 405 for the other methods of each path. */
export function addApiRoutes(app: Polka, routes: ApiRoutes): void {
  const { base, config } = routes;

  // Each handler is looked up under its operation's own id (K): it is given that operation's request.
  const authenticated = <K extends AuthenticatedId>(op: ConsoleOperation<K>): Respond => {
    const handler = routes.authenticated[op.operationId];
    return async (req, res) => {
      const auth = await authenticateRequest(base, req, config);
      return handler({
        ...(await validated(op, auth, req, res)),
        principal: auth.principal,
        sessionId: auth.sessionId,
      });
    };
  };
  const anyone = <K extends AnonymousId>(op: ConsoleOperation<K>): Respond => {
    const handler = routes.anonymous[op.operationId];
    return async (req, res) => handler(await validated(op, null, req, res));
  };

  /** Operation K's request, checked in order: its path (404), the password-change and owner rules, its query, its body. */
  async function validated<K extends OperationId>(
    op: ConsoleOperation<K>,
    auth: Authenticated | null,
    req: PolkaRequest,
    res: ServerResponse,
  ): Promise<AnonymousCall<K>> {
    const clientIp = routes.proxies.clientAddress(req);
    // polka merges the parameters of every route the path matches (the 405 fallbacks too): take the operation's own.
    // polka has percent-decoded them once; a second decoding would make `%2540` another spelling of `@`.
    const params = op.checkPath(
      Object.fromEntries(op.pathParams.map((name) => [name, req.params[name] ?? ''])),
    );
    if (params === null) throw new ContractError('not_found', { message: 'No such resource.' });
    // A generated password (operator create, reset-password) was seen by whoever made it: until
    // its operator has changed it, their session or token may do nothing else.
    if (auth?.principal.operator.must_change_password === 1 && !op.allowedBeforePasswordChange)
      throw new ContractError('password_change_required');
    if (op.ownerOnly && auth?.principal.operator.role !== 'owner')
      throw new ContractError('forbidden');
    const query = op.checkQuery(new URL(req.url, 'http://console').searchParams);
    if (!query.ok) throw invalid(query.details);
    let sent: unknown = {};
    if (
      op.body.accepted &&
      (op.body.required ||
        Number(req.headers['content-length'] ?? 0) > 0 ||
        req.headers['transfer-encoding'] !== undefined)
    ) {
      const json = await readJsonBody(req, res, {
        limit: MAX_BODY_BYTES,
        budget: routes.bodyBudget,
        envelope: 'console',
      });
      // No field of the console API is binary: bytes that are not UTF-8 are refused whole.
      if (json.undecodable)
        throw new ContractError('body:invalid_json', {
          message: 'The request body is not valid UTF-8.',
        });
      sent = json.value;
    }
    const body = op.body.check(sent);
    if (!body.ok) throw invalid(body.details);
    const ctx = auth ? actingAs(base, auth.principal.operator, clientIp) : { ...base, clientIp };
    return { req, res, ctx, clientIp, params, query: query.value, body: body.value };
  }

  const methodsByRoute = new Map<string, string[]>();
  function mount(op: ConsoleOperation<OperationId>, signedIn: boolean, respond: Respond): void {
    // The document says who may call an operation (`security`); the handler's table must say the same.
    if (op.authenticated !== signedIn)
      throw new Error(
        `console operation ${op.operationId}: its handler and the document disagree on authentication`,
      );
    // Exact routes, case-sensitive, no trailing slash: a path is served in one spelling only (http/requestPath.ts).
    app.add(op.method, exactRoute(op.route), (req, res) => {
      void respond(req, res)
        .then((answer) => send(res, answer))
        .catch((err: unknown) => routes.fail(res, err));
    });
    methodsByRoute.set(op.route, [...(methodsByRoute.get(op.route) ?? []), op.method]);
  }
  for (const declared of declaredOperations()) {
    const id = declared.operationId;
    if (hasHandler(routes.authenticated, id)) {
      const op = compileOperation({ ...declared, operationId: id });
      mount(op, true, authenticated(op));
    } else if (hasHandler(routes.anonymous, id)) {
      const op = compileOperation({ ...declared, operationId: id });
      mount(op, false, anyone(op));
    } else {
      throw new Error(`console operation ${id} has no handler`);
    }
  }
  for (const [route, methods] of methodsByRoute) {
    app.all(exactRoute(route), (_req, res) =>
      routes.refuse(res, new ContractError('method_not_allowed'), { Allow: methods.join(', ') }),
    );
  }
}

function send(res: ServerResponse, answer: Answer): void {
  if (answer === undefined) return;
  if (answer.body === undefined) {
    res.writeHead(answer.status, answer.headers);
    res.end();
  } else {
    sendJson(res, answer.status, answer.body, answer.headers);
  }
}
