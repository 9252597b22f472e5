import { asDetails, type Details } from './errors.js';
import { ajv, compiled, schemas } from './openapiSchemas.js';
import { translate } from './schemaErrorDetails.js';

type Json = unknown;

const validateMessageSchema = compiled('Message');
const validateIdempotencyKeySchema = compiled('IdempotencyKey');
// The batch envelope is checked on its own; each element then goes through the Message rules.
const validateBatchEnvelopeSchema = ajv.compile({
  ...schemas.BatchRequest,
  $id: 'postern:batch-envelope',
  properties: { messages: { ...schemas.BatchRequest.properties.messages, items: true } },
});

export type ValidationResult<T> = { ok: true; value: T } | { ok: false; details: Details };

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
  const details = translate(
    schemas.BatchRequest,
    validateBatchEnvelopeSchema.errors ?? [],
    body as Record<string, Json>,
  );
  return { ok: false, details: asDetails(details, { field: 'body', code: 'body:invalid' }) };
}

/** The Idempotency-Key header: `null` when valid, else the contract code. */
export function idempotencyKeyError(
  value: string,
): 'idempotency_key:invalid' | 'idempotency_key:invalid_length' | null {
  if (validateIdempotencyKeySchema(value)) return null;
  const errs = validateIdempotencyKeySchema.errors ?? [];
  // Length is reported first: a key of the wrong length is wrong whatever its characters.
  if (errs.some((e) => e.keyword === 'minLength' || e.keyword === 'maxLength'))
    return 'idempotency_key:invalid_length';
  return 'idempotency_key:invalid';
}
