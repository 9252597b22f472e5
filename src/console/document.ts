/** The console API document and the validators compiled from it; routes come from it too, so they cannot drift. */
import { Ajv2020, type AnySchemaObject, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import consoleApi from './openapi.json' with { type: 'json' };
import type { ErrorDetail } from '../contract/errors.js';

export const consoleDocument = consoleApi as unknown as {
  servers: { url: string }[];
  paths: Record<string, Record<string, OperationObject>>;
  components: { schemas: Record<string, AnySchemaObject>; parameters: Record<string, ParameterObject> };
};

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
  'x-before-password-change'?: boolean;
}

type Checked<T> = { ok: true; value: T } | { ok: false; details: ErrorDetail[] };

export interface ConsoleOperation {
  operationId: string;
  method: string;
  path: string;
  /** `/console/api/v1/messages/:message_id` */
  route: string;
  pathParams: string[];
  /** false: sign-in, this document. */
  authenticated: boolean;
  ownerOnly: boolean;
  allowedBeforePasswordChange: boolean;
  /** The id cannot exist, so 404. */
  checkPath(params: Record<string, string>): boolean;
  checkQuery(query: URLSearchParams): Checked<Record<string, unknown>>;
  body: { required: boolean; check(body: unknown): Checked<Record<string, unknown>> } | null;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
function newAjv(coerce: boolean): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: true, verbose: true, strict: false, coerceTypes: coerce ? 'array' : false, useDefaults: true });
  addFormats(ajv);
  ajv.addKeyword({ keyword: 'x-error-codes', schemaType: 'object' });
  ajv.addSchema(consoleApi as AnySchemaObject, 'console');
  return ajv;
}
const bodies = newAjv(false);
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

/** One per field, the first error of each. */
export function detailsOf(errors: ErrorObject[] | null | undefined): ErrorDetail[] {
  const byField = new Map<string, string>();
  const unions: ErrorDetail[] = [];
  for (const err of errors ?? []) {
    const segments = err.instancePath === '' ? [] : err.instancePath.slice(1).split('/');
    if (err.keyword === 'required') segments.push(String(err.params.missingProperty));
    if (err.keyword === 'additionalProperties') segments.push(String(err.params.additionalProperty));
    const field = segments.length > 0 ? segments.join('.') : 'body';
    const top = segments[0] ?? 'body';
    if (err.keyword === 'oneOf' || err.keyword === 'anyOf') {
      const named = (err.parentSchema?.['x-error-codes'] as Record<string, string> | undefined)?.[err.keyword];
      if (named) unions.push({ field, code: named });
      continue;
    }
    if (!byField.has(field)) byField.set(field, `${top}:${REASONS[err.keyword] ?? 'invalid'}`);
  }
  // Unknown keys last (as the send API orders them); otherwise the schema's own order.
  const details = [...byField].map(([field, code]) => ({ field, code })).sort((a, b) => Number(a.code.endsWith(':unknown_key')) - Number(b.code.endsWith(':unknown_key')));
  // A union's own code only when nothing more precise was found (its branches' errors are noise).
  return details.length > 0 && unions.length === 0 ? details : unions.length > 0 ? unions : details;
}

function resolveParameter(p: ParameterObject | { $ref: string }): ParameterObject {
  if ('$ref' in p) return consoleDocument.components.parameters[p.$ref.replace('#/components/parameters/', '')];
  return p;
}

function parameterSchema(params: ParameterObject[]): AnySchemaObject {
  return {
    type: 'object',
    additionalProperties: false,
    required: params.filter((p) => p.required).map((p) => p.name),
    properties: Object.fromEntries(params.map((p) => [p.name, refsInto(p.schema)])),
  };
}

function refsInto(schema: AnySchemaObject): AnySchemaObject {
  return JSON.parse(JSON.stringify(schema).replace(/"\$ref":"#\//g, '"$ref":"console#/')) as AnySchemaObject;
}

function compileOperation(method: string, path: string, op: OperationObject): ConsoleOperation {
  const params = (op.parameters ?? []).map(resolveParameter);
  const pathParams = params.filter((p) => p.in === 'path');
  const queryParams = params.filter((p) => p.in === 'query');
  const checkPathSchema = parameters.compile(parameterSchema(pathParams));
  const checkQuerySchema: ValidateFunction = parameters.compile(parameterSchema(queryParams));
  const arrays = new Set(queryParams.filter((p) => p.schema.type === 'array').map((p) => p.name));
  const bodySchema = op.requestBody?.content['application/json']?.schema;
  const checkBody = bodySchema ? bodies.compile(refsInto(bodySchema)) : null;
  return {
    operationId: op.operationId,
    method: method.toUpperCase(),
    path,
    route: API_BASE + path.replace(/\{([a-z_]+)\}/g, ':$1'),
    pathParams: pathParams.map((p) => p.name),
    authenticated: op.security === undefined || op.security.length > 0,
    ownerOnly: op['x-role'] === 'owner',
    allowedBeforePasswordChange: op['x-before-password-change'] === true,
    checkPath(values) {
      return checkPathSchema({ ...values }) === true;
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
    body: checkBody
      ? {
          required: op.requestBody?.required ?? false,
          check(body) {
            if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, details: [{ field: 'body', code: 'body:invalid_type' }] };
            if (checkBody(body)) return { ok: true, value: body as Record<string, unknown> };
            return { ok: false, details: detailsOf(checkBody.errors) };
          },
        }
      : null,
  };
}

export function consoleOperations(): ConsoleOperation[] {
  const ops: ConsoleOperation[] = [];
  for (const [path, item] of Object.entries(consoleDocument.paths)) {
    for (const [method, op] of Object.entries(item)) ops.push(compileOperation(method, path, op));
  }
  return ops;
}
