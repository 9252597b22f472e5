/**
 * Ajv's raw errors translated into the contract's `{field, code}` details:
 * the code a keyword produces comes from the schema's `x-error-codes`, else from the keyword.
 */
import type { AnySchemaObject, ErrorObject } from 'ajv';
import { detailOrder } from './detailOrder.js';
import type { ErrorDetail } from './errors.js';
import { compiled, schemas } from './openapiSchemas.js';

type Json = unknown;
type SchemaNode = AnySchemaObject;

const validateAddress = compiled('Address');

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
  if (node.items && typeof node.items === 'object' && /^\d+$/.test(seg))
    return node.items as SchemaNode;
  if (node.additionalProperties && typeof node.additionalProperties === 'object')
    return node.additionalProperties as SchemaNode;
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
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
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
  if (err.keyword === 'oneOf' || err.keyword === 'anyOf' || err.keyword === 'propertyNames')
    return null;
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
  else if (err.keyword === 'additionalProperties')
    fieldSegments = [...segments, String(err.params.additionalProperty)];
  else if (err.propertyName !== undefined) fieldSegments = [...segments, err.propertyName];
  const parent = err.parentSchema as SchemaNode | undefined;
  const explicit = codesOf(parent)?.[err.keyword];
  const reason = REASON_BY_KEYWORD[err.keyword] ?? 'invalid';
  // Errors about the body object itself (its type) are `body:` codes; all others take their top-level field.
  const prefix = fieldSegments.length > 0 ? fieldSegments[0] : 'body';
  const code = explicit ?? `${prefix}:${reason}`;
  const weak =
    err.keyword === 'type' &&
    parent !== undefined &&
    Object.keys(parent).length <= 2 &&
    parent.type === 'null';
  return { segments: fieldSegments, code, rank: weak ? 0 : 2 };
}

/** Not an address of any form (null, a number, a nested list): a type error, not a bad address. */
const notAnAddress = (value: Json) =>
  value === null ||
  Array.isArray(value) ||
  (typeof value !== 'string' && typeof value !== 'object');

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

/** Turns ajv errors into one `{field, code}` per failing field, in a stable order. */
export function translate(
  root: SchemaNode,
  errors: ErrorObject[],
  body: Record<string, Json>,
): ErrorDetail[] {
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
    if (
      c.rank === 0 &&
      [...byField.entries()].some(([f, o]) => o.rank > 0 && f.startsWith(`${field}.`))
    )
      continue;
    details.push({ field, code: c.code });
  }
  for (const field of addressFieldsFailing)
    details.push(...addressDetails(field, body[field], field !== 'from'));
  return details.sort(detailOrder);
}
