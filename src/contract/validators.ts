import { Ajv, type ErrorObject, type ValidateFunction, type AnySchemaObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import openapi from './openapi.json' with { type: 'json' };
import { parseMailbox } from './address.js';
import { asDetails, type Details, type ErrorDetail } from './errors.js';

/**
 * Request validators compiled from the OpenAPI document, so the document and the behaviour
 * cannot drift. Ajv's raw errors are translated into the contract's `{field, code}` details:
 * the code a keyword produces comes from the schema's `x-error-codes`, else from the keyword.
 */
export const openapiDocument = openapi as unknown as { components: { schemas: Record<string, AnySchemaObject> } } & Record<string, unknown>;

type Json = unknown;
type SchemaNode = AnySchemaObject;

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const ajv = new Ajv({ allErrors: true, verbose: true, strict: false, unicodeRegExp: true });
addFormats(ajv);
ajv.addFormat('mailbox', { type: 'string', validate: (s: string) => parseMailbox(s) !== null });
ajv.addKeyword({ keyword: 'x-error-codes', schemaType: 'object' });
ajv.addKeyword({ keyword: 'x-element-validated-separately', schemaType: 'boolean' });
ajv.addKeyword({
  keyword: 'x-reserved-names',
  type: 'string',
  schemaType: 'object',
  errors: true,
  validate: (spec: { names: string[]; prefixes: string[] }, name: string) => {
    const lower = name.toLowerCase();
    return !spec.names.includes(lower) && !spec.prefixes.some((p) => lower.startsWith(p));
  },
});
ajv.addSchema(openapi as AnySchemaObject, 'openapi');

function compiled(name: string): ValidateFunction {
  const fn = ajv.getSchema(`openapi#/components/schemas/${name}`);
  if (!fn) throw new Error(`schema ${name} missing from openapi.json`);
  return fn;
}

const schemas = openapiDocument.components.schemas;
const validateMessageSchema = compiled('Message');
const validateAddress = compiled('Address');
const validateIdempotencyKeySchema = compiled('IdempotencyKey');
// The batch envelope is checked on its own; each element then goes through the Message rules.
const validateBatchEnvelopeSchema = ajv.compile({
  ...schemas.BatchRequest,
  $id: 'postern:batch-envelope',
  properties: { messages: { ...schemas.BatchRequest.properties.messages, items: true } },
});

/** The order of `details`: the Message table's field order; body-level rules sit by their fields. */
const FIELD_ORDER = [
  'from', 'to', 'cc', 'bcc', 'recipients', 'reply_to', 'subject', 'html', 'text', 'body', 'headers', 'attachments',
  'tags', 'metadata', 'category', 'scheduled_at', 'paused', 'routing', 'provider_options', 'messages',
];
const ADDRESS_FIELDS = new Set(['from', 'to', 'cc', 'bcc', 'reply_to']);

const REASON_BY_KEYWORD: Record<string, string> = {
  type: 'invalid_type',
  required: 'required',
  maxLength: 'too_long',
  minLength: 'too_short',
  maxItems: 'too_many',
  minItems: 'too_few',
  pattern: 'invalid_format',
  format: 'invalid_format',
  enum: 'invalid_value',
  const: 'invalid_value',
  additionalProperties: 'unknown_key',
  maxProperties: 'too_many_keys',
  uniqueItems: 'duplicate',
};

function resolveRef(node: SchemaNode): SchemaNode {
  let current = node;
  while (typeof current.$ref === 'string') {
    const name = current.$ref.replace('#/components/schemas/', '');
    current = schemas[name];
  }
  return current;
}

/** The schema that governs the value at `segments` below `root` (choosing union branches by shape). */
function schemaChain(root: SchemaNode, segments: string[]): SchemaNode[] {
  const chain: SchemaNode[] = [root];
  let node: SchemaNode | undefined = root;
  for (const seg of segments) {
    node = node && childSchema(node, seg);
    if (!node) break;
    chain.push(node);
  }
  return chain;
}

function childSchema(raw: SchemaNode, seg: string): SchemaNode | undefined {
  const node = resolveRef(raw);
  if (node.properties?.[seg]) return node.properties[seg] as SchemaNode;
  if (node.items && typeof node.items === 'object' && /^\d+$/.test(seg)) return node.items as SchemaNode;
  if (node.additionalProperties && typeof node.additionalProperties === 'object') return node.additionalProperties as SchemaNode;
  for (const key of ['oneOf', 'anyOf', 'allOf'] as const) {
    for (const branch of (node[key] as SchemaNode[] | undefined) ?? []) {
      const found = childSchema(branch, seg);
      if (found) return found;
    }
  }
  return undefined;
}

function codesOf(node: SchemaNode | undefined): Record<string, string> | undefined {
  return node ? (node['x-error-codes'] as Record<string, string> | undefined) : undefined;
}

function jsonPointerToSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

interface Candidate {
  segments: string[];
  code: string;
  /**
   * How telling the error is, when several land on one field: 0 a type error from a union
   * branch that did not match, 1 a union's catch-all code, 2 a keyword's own code.
   */
  rank: 0 | 1 | 2;
}

function candidateFor(root: SchemaNode, err: ErrorObject): Candidate | null {
  if (err.keyword === 'oneOf' || err.keyword === 'anyOf' || err.keyword === 'propertyNames') return null;
  const segments = jsonPointerToSegments(err.instancePath);
  const chain = schemaChain(root, segments);
  // A union member whose `*` code covers everything below it (e.g. routing.provider).
  for (let depth = 1; depth < chain.length; depth++) {
    const star = codesOf(chain[depth])?.['*'];
    if (star) {
      const specific = codesOf(chain[depth])?.[err.keyword];
      return { segments: segments.slice(0, depth), code: specific ?? star, rank: specific ? 2 : 1 };
    }
  }
  let fieldSegments = segments;
  if (err.keyword === 'required') fieldSegments = [...segments, String(err.params.missingProperty)];
  else if (err.keyword === 'additionalProperties') fieldSegments = [...segments, String(err.params.additionalProperty)];
  else if (err.propertyName !== undefined) fieldSegments = [...segments, err.propertyName];
  const parent = err.parentSchema as SchemaNode | undefined;
  const explicit = codesOf(parent)?.[err.keyword];
  const reason = REASON_BY_KEYWORD[err.keyword] ?? 'invalid';
  // Errors about the body object itself (its type) are `body:` codes; all others take their top-level field.
  const prefix = fieldSegments.length > 0 ? fieldSegments[0] : 'body';
  const code = explicit ?? `${prefix}:${reason}`;
  const weak = err.keyword === 'type' && parent !== undefined && Object.keys(parent).length <= 2 && parent.type === 'null';
  return { segments: fieldSegments, code, rank: weak ? 0 : 2 };
}

/** Not an address of any form (null, a number, a nested list): a type error, not a bad address. */
const notAnAddress = (value: Json) => value === null || Array.isArray(value) || (typeof value !== 'string' && typeof value !== 'object');

function addressDetail(field: string, path: string, value: Json): ErrorDetail[] {
  if (notAnAddress(value)) return [{ field: path, code: `${field}:invalid_type` }];
  return validateAddress(value) ? [] : [{ field: path, code: `${field}:invalid_address` }];
}

function addressDetails(field: string, value: Json, list: boolean): ErrorDetail[] {
  if (list && Array.isArray(value)) {
    if (value.length === 0) return [{ field, code: `${field}:too_few` }];
    return value.flatMap((item, i) => addressDetail(field, `${field}.${i}`, item));
  }
  return addressDetail(field, field, value);
}

function orderKey(d: ErrorDetail): [number, string] {
  // Unknown keys come last, even one that happens to be named like a rule (`body`, `recipients`).
  if (d.code === 'body:unknown_key') return [FIELD_ORDER.length, d.field];
  const top = d.field.split('.')[0];
  const idx = FIELD_ORDER.indexOf(top);
  return [idx === -1 ? FIELD_ORDER.length : idx, d.field];
}

// One collator: localeCompare with options builds one per call (1,000 unknown keys took 80 ms to sort).
const pathCollator = new Intl.Collator('en', { numeric: true });

/** Orders details by the Message table's field order, then by path (numbers numerically). */
export function detailOrder(a: ErrorDetail, b: ErrorDetail): number {
  const [ia, fa] = orderKey(a);
  const [ib, fb] = orderKey(b);
  return ia - ib || pathCollator.compare(fa, fb);
}

/** Turns ajv errors into one `{field, code}` per failing field, in a stable order. */
function translate(root: SchemaNode, errors: ErrorObject[], body: Record<string, Json>): ErrorDetail[] {
  const byField = new Map<string, Candidate>();
  const addressFieldsFailing = new Set<string>();
  for (const err of errors) {
    const segments = jsonPointerToSegments(err.instancePath);
    if (segments.length > 0 && ADDRESS_FIELDS.has(segments[0])) {
      addressFieldsFailing.add(segments[0]);
      continue;
    }
    const candidate = candidateFor(root, err);
    if (!candidate) continue;
    const field = candidate.segments.length ? candidate.segments.join('.') : 'body';
    const existing = byField.get(field);
    if (!existing || existing.rank < candidate.rank) byField.set(field, candidate);
  }
  // A union branch's type error is dropped when a stronger error exists below the same field.
  const details: ErrorDetail[] = [];
  for (const [field, c] of byField) {
    if (c.rank === 0 && [...byField.entries()].some(([f, o]) => o.rank > 0 && f.startsWith(`${field}.`))) continue;
    details.push({ field, code: c.code });
  }
  for (const field of addressFieldsFailing) details.push(...addressDetails(field, body[field], field !== 'from'));
  return details.sort(detailOrder);
}

export type ValidationResult<T> = { ok: true; value: T } | { ok: false; details: Details };

const MESSAGE_FIELDS = new Set(Object.keys(schemas.Message.properties as object));
const RECIPIENT_FIELDS = new Set(['to', 'cc', 'bcc']);

/**
 * The detail for a body refused before parsing because one of its objects has too many keys or
 * one of its arrays too many items (src/http/jsonShape.ts), named as the schema would name it:
 * a container under an unknown key is that unknown key; an over-long `to`/`cc`/`bcc` is
 * `recipients:too_many`; otherwise `<field>:too_many_keys` / `<field>:too_many` at the
 * container. In a batch, each element of `messages` is a Message of its own (`messages.3.…`).
 */
export function shapeLimitDetail(path: string[], kind: 'keys' | 'items', envelope: 'message' | 'batch'): ErrorDetail {
  if (envelope === 'batch' && !(path[0] === 'messages' && path.length >= 2)) {
    if (path.length === 0) return { field: 'body', code: kind === 'keys' ? 'body:too_many_keys' : 'body:invalid_type' };
    if (path[0] !== 'messages') return { field: path[0], code: 'body:unknown_key' };
    return { field: 'messages', code: kind === 'items' ? 'messages:too_many' : 'messages:invalid_type' };
  }
  const prefix = envelope === 'batch' ? path.slice(0, 2) : [];
  const inMessage = path.slice(prefix.length);
  const field = (parts: string[]) => [...prefix, ...parts].join('.') || 'body';
  if (inMessage.length === 0) return { field: field([]), code: kind === 'keys' ? 'body:too_many_keys' : 'body:invalid_type' };
  const top = inMessage[0];
  if (!MESSAGE_FIELDS.has(top)) return { field: field([top]), code: 'body:unknown_key' };
  if (kind === 'items' && RECIPIENT_FIELDS.has(top)) return { field: field(['recipients']), code: 'recipients:too_many' };
  return { field: field(inMessage), code: `${top}:${kind === 'keys' ? 'too_many_keys' : 'too_many'}` };
}

/** Validates one Message body against the contract schema (not the clock- or project-bound rules). */
export function validateMessageBody(body: Json): ValidationResult<Record<string, Json>> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, details: [{ field: 'body', code: 'body:invalid_type' }] };
  }
  const record = body as Record<string, Json>;
  if (validateMessageSchema(body)) return { ok: true, value: record };
  const details = translate(schemas.Message, validateMessageSchema.errors ?? [], record);
  return { ok: false, details: asDetails(details, { field: 'body', code: 'body:invalid' }) };
}

export function validateBatchEnvelope(body: Json): ValidationResult<{ messages: Json[] }> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, details: [{ field: 'body', code: 'body:invalid_type' }] };
  }
  if (validateBatchEnvelopeSchema(body)) return { ok: true, value: body as { messages: Json[] } };
  const details = translate(schemas.BatchRequest, validateBatchEnvelopeSchema.errors ?? [], body as Record<string, Json>);
  return { ok: false, details: asDetails(details, { field: 'body', code: 'body:invalid' }) };
}

/** The Idempotency-Key header: `null` when valid, else the contract code. */
export function idempotencyKeyError(value: string): 'idempotency_key:invalid' | 'idempotency_key:invalid_length' | null {
  if (validateIdempotencyKeySchema(value)) return null;
  const errs = validateIdempotencyKeySchema.errors ?? [];
  // Length is reported first: a key of the wrong length is wrong whatever its characters.
  if (errs.some((e) => e.keyword === 'minLength' || e.keyword === 'maxLength')) return 'idempotency_key:invalid_length';
  return 'idempotency_key:invalid';
}
