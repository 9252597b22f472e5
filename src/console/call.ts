/**
 * What a console API handler is given and answers, by operationId: the path parameters, query
 * and body that passed validation (document.ts), typed the way the document declares them
 * (types.gen.ts `Operations`, generated from openapi.json). The handler tables are mapped over
 * the operationIds, so an operation without a handler, or a handler for none, does not compile.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { OperatorContext } from '../operator/context.js';
import type { Principal } from '../operator/sessions.js';
import type { OperationId } from './document.js';
import type { Operations } from './types.gen.js';

type Authenticated<A extends boolean> = {
  [K in OperationId]: Operations[K]['authenticated'] extends A ? K : never;
}[OperationId];
/** The operations that need a signed-in operator (a session or a token). */
export type AuthenticatedId = Authenticated<true>;
/** Those that do not (`security: []`: sign-in, a preview's inline part by its token, the document). */
export type AnonymousId = Authenticated<false>;

/** One request of operation K, validated against the document. */
export interface AnonymousCall<K extends OperationId> {
  req: IncomingMessage;
  res: ServerResponse;
  /** Acting for the principal (audit log: operator, client address), or for nobody from the client's address. */
  ctx: OperatorContext;
  clientIp: string;
  params: Operations[K]['params'];
  query: Operations[K]['query'];
  body: Operations[K]['body'];
}

/** One request of operation K by a signed-in operator. */
export interface Call<K extends OperationId> extends AnonymousCall<K> {
  principal: Principal;
  sessionId: string | null;
}

/** A JSON answer, or `undefined` when the handler wrote the response itself (files, streams). */
export type Answer =
  | { status: number; body?: unknown; headers?: Record<string, string> }
  | undefined;
export type Handler<K extends AuthenticatedId> = (call: Call<K>) => Answer | Promise<Answer>;
export type AnonymousHandler<K extends AnonymousId> = (
  call: AnonymousCall<K>,
) => Answer | Promise<Answer>;

/** A handler for each operation, and for nothing else: those of signed-in operators, and the others. */
export type AuthenticatedHandlers = { [K in AuthenticatedId]: Handler<K> };
export type AnonymousHandlers = { [K in AnonymousId]: AnonymousHandler<K> };

/** Whether `id` names a handler of `table` (its keys are operationIds). */
export function hasHandler<T extends object>(table: T, id: string): id is Extract<keyof T, string> {
  return Object.hasOwn(table, id);
}
