/**
 * The console API document and the validators compiled from it, each ajv's type guard for its
 * operation's generated request type; routes come from it too, so they cannot drift.
 */
import {
  Ajv2020,
  type AnySchemaObject,
  type ErrorObject,
  type ValidateFunction,
} from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ErrorDetail } from '../contract/errors.js';
import consoleApi from './openapi.json' with { type: 'json' };
import type { Operations } from './types.gen.js';

/** The document's operations, by operationId. */
export type OperationId = keyof Operations;

export const consoleDocument = consoleApi as unknown as {
  servers: { url: string }[];
  paths: Record<string, Record<string, OperationObject>>;
  components: {
    schemas: Record<string, AnySchemaObject>;
    parameters: Record<string, ParameterObject>;
  };
};

/** Where every console API path is mounted: `/console/api/v1`. */
export const API_BASE = consoleDocument.servers[0].url;

interface ParameterObject {
  name: string;
  in: 'path' | 'query';
  required?: boolean;
  schema: AnySchemaObject;
}

interface OperationObject {
  operationId: string;
  parameters?: (ParameterObject | { $ref: string })[];
  requestBody?: { required?: boolean; content: Record<string, { schema: AnySchemaObject }> };
  security?: unknown[];
  'x-role'?: 'owner';
  /** Allowed to an operator who must change their (generated) password first. */
  'x-before-password-change'?: boolean;
}

/** The HTTP methods an OpenAPI path item may name. */
const METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'TRACE'] as const;

type Checked<T> = { ok: true; value: T } | { ok: false; details: ErrorDetail[] };

/** An operation the way the document declares it; compiled (compileOperation) once its operationId is known to be one of OperationId. */
export interface DeclaredOperation<Id extends string = string> {
  operationId: Id;
  method: string;
  path: string;
  spec: OperationObject;
}

export interface ConsoleOperation<K extends OperationId> {
  operationId: K;
  method: (typeof METHODS)[number];
  /** The document's path, `/messages/{message_id}`. */
  path: string;
  /** The same for polka, under API_BASE: `/console/api/v1/messages/:message_id`. */
  route: string;
  /** The names of its path parameters. */
  pathParams: string[];
  /** false: no authentication (sign-in, this document). */
  authenticated: boolean;
  ownerOnly: boolean;
  /** Allowed while the operator must change their password (`x-before-password-change`: the change itself, sign-out, who is signed in). */
  allowedBeforePasswordChange: boolean;
  /** The path parameters, typed by their schemas (`index` a number); null when one does not match: the id cannot exist, so 404. */
  checkPath(params: Record<string, string>): Operations[K]['params'] | null;
  checkQuery(query: URLSearchParams): Checked<Operations[K]['query']>;
  /**
   * Its JSON body. `accepted` false: the operation takes none (a body sent is not read). A body
   * not sent is checked like `{}` (an optional body's defaults apply; an operation without one gets `{}`).
   */
  body: {
    accepted: boolean;
    required: boolean;
    check(body: unknown): Checked<Operations[K]['body']>;
  };
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
function newAjv(coerce: boolean): Ajv2020 {
  const ajv = new Ajv2020({
    allErrors: true,
    verbose: true,
    strict: false,
    coerceTypes: coerce ? 'array' : false,
    useDefaults: true,
  });
  addFormats(ajv);
  ajv.addKeyword({ keyword: 'x-error-codes', schemaType: 'object' });
  ajv.addSchema(consoleApi as AnySchemaObject, 'console');
  return ajv;
}
const bodyAjv = newAjv(false);
const parameters = newAjv(true);

const REASONS: Record<string, string> = {
  type: 'invalid_type',
  required: 'required',
  additionalProperties: 'unknown_key',
  maxLength: 'too_long',
  minLength: 'too_short',
  maxItems: 'too_many',
  minItems: 'too_few',
  minProperties: 'required',
  uniqueItems: 'duplicate',
  pattern: 'invalid_format',
  format: 'invalid_format',
  enum: 'invalid_value',
  const: 'invalid_value',
  minimum: 'out_of_range',
  maximum: 'out_of_range',
};

/** Ajv's errors as the contract's `{field, code}` details: one per field, the first error of each. */
export function detailsOf(errors: ErrorObject[] | null | undefined): ErrorDetail[] {
  const byField = new Map<string, string>();
  const unions: ErrorDetail[] = [];
  for (const err of errors ?? []) {
    const segments = err.instancePath === '' ? [] : err.instancePath.slice(1).split('/');
    if (err.keyword === 'required') segments.push(String(err.params.missingProperty));
    if (err.keyword === 'additionalProperties')
      segments.push(String(err.params.additionalProperty));
    const field = segments.length > 0 ? segments.join('.') : 'body';
    const top = segments[0] ?? 'body';
    if (err.keyword === 'oneOf' || err.keyword === 'anyOf') {
      const named = (err.parentSchema?.['x-error-codes'] as Record<string, string> | undefined)?.[
        err.keyword
      ];
      if (named) unions.push({ field, code: named });
      continue;
    }
    if (!byField.has(field)) byField.set(field, `${top}:${REASONS[err.keyword] ?? 'invalid'}`);
  }
  // Unknown keys last (as the send API orders them); otherwise the schema's own order.
  const details = [...byField]
    .map(([field, code]) => ({ field, code }))
    .sort(
      (a, b) => Number(a.code.endsWith(':unknown_key')) - Number(b.code.endsWith(':unknown_key')),
    );
  // A union's own code only when nothing more precise was found (its branches' errors are noise).
  return details.length > 0 && unions.length === 0 ? details : unions.length > 0 ? unions : details;
}

function resolveParameter(p: ParameterObject | { $ref: string }): ParameterObject {
  if ('$ref' in p)
    return consoleDocument.components.parameters[p.$ref.replace('#/components/parameters/', '')];
  return p;
}

/** An object schema of the named parameters, each with its own schema (for ajv). */
function parameterSchema(params: ParameterObject[]): AnySchemaObject {
  return {
    type: 'object',
    additionalProperties: false,
    required: params.filter((p) => p.required).map((p) => p.name),
    properties: Object.fromEntries(params.map((p) => [p.name, refsInto(p.schema)])),
  };
}

/** `#/components/…` references, made absolute into the registered document. */
function refsInto(schema: AnySchemaObject): AnySchemaObject {
  return JSON.parse(
    JSON.stringify(schema).replace(/"\$ref":"#\//g, '"$ref":"console#/'),
  ) as AnySchemaObject;
}

/** What an operation without a body accepts: nothing. */
const NO_BODY: AnySchemaObject = { type: 'object', maxProperties: 0 };

/** The validators of a declared operation, typed by operation K's request (the types generated from the same document). */
export function compileOperation<K extends OperationId>(
  declared: DeclaredOperation<K>,
): ConsoleOperation<K> {
  type Request = Operations[K];
  const { path, spec: op } = declared;
  const method = METHODS.find((m) => m === declared.method.toUpperCase());
  if (method === undefined) throw new Error(`${declared.method} ${path}: not an HTTP method`);
  const params = (op.parameters ?? []).map(resolveParameter);
  const pathParams = params.filter((p) => p.in === 'path');
  const queryParams = params.filter((p) => p.in === 'query');
  const checkPathSchema: ValidateFunction<Request['params']> = parameters.compile(
    parameterSchema(pathParams),
  );
  const checkQuerySchema: ValidateFunction<Request['query']> = parameters.compile(
    parameterSchema(queryParams),
  );
  const arrays = new Set(queryParams.filter((p) => p.schema.type === 'array').map((p) => p.name));
  const bodySchema = op.requestBody?.content['application/json']?.schema;
  const checkBody: ValidateFunction<Request['body']> = bodyAjv.compile(
    bodySchema ? refsInto(bodySchema) : NO_BODY,
  );
  return {
    operationId: declared.operationId,
    method,
    path,
    route: API_BASE + path.replace(/\{([a-z_]+)\}/g, ':$1'),
    pathParams: pathParams.map((p) => p.name),
    authenticated: op.security === undefined || op.security.length > 0,
    ownerOnly: op['x-role'] === 'owner',
    allowedBeforePasswordChange: op['x-before-password-change'] === true,
    checkPath(values) {
      // Coerced like the query (ajv: `"7"` → 7); polka's own object is left unchanged.
      const value: unknown = { ...values };
      return checkPathSchema(value) ? value : null;
    },
    checkQuery(query) {
      const value: Record<string, unknown> = {};
      const details: ErrorDetail[] = [];
      for (const name of new Set(query.keys())) {
        const all = query.getAll(name);
        if (arrays.has(name)) value[name] = all;
        else if (all.length > 1) details.push({ field: name, code: `${name}:duplicate` });
        else value[name] = all[0];
      }
      if (details.length > 0) return { ok: false, details };
      if (checkQuerySchema(value)) return { ok: true, value };
      return { ok: false, details: detailsOf(checkQuerySchema.errors) };
    },
    body: {
      accepted: bodySchema !== undefined,
      required: op.requestBody?.required ?? false,
      check(body) {
        if (typeof body !== 'object' || body === null || Array.isArray(body))
          return { ok: false, details: [{ field: 'body', code: 'body:invalid_type' }] };
        if (checkBody(body)) return { ok: true, value: body };
        return { ok: false, details: detailsOf(checkBody.errors) };
      },
    },
  };
}

/** Every operation the document declares. */
export function declaredOperations(): DeclaredOperation[] {
  const ops: DeclaredOperation[] = [];
  for (const [path, item] of Object.entries(consoleDocument.paths)) {
    for (const [method, spec] of Object.entries(item))
      ops.push({ operationId: spec.operationId, method, path, spec });
  }
  return ops;
}
