import { detailOrder } from '../contract/detailOrder.js';
import type { Details, ErrorDetail } from '../contract/errors.js';
import { openapiDocument } from '../contract/openapiSchemas.js';
import type { Message } from '../contract/types.gen.js';
import { validateMessageBody } from '../contract/validators.js';

/** Limits of the contract that a JSON Schema cannot say (cross-field, clock-bound, decoded sizes). */
export const MESSAGE_LIMITS = {
  maxRecipients: 50,
  maxAttachmentBytes: 10 * 1024 * 1024,
  maxAttachmentsTotalBytes: 25 * 1024 * 1024,
  maxScheduleAheadMs: 72 * 3600 * 1000,
} as const;

/** The contract's longest `text` and `html`, in characters (code points), as its schema states them. */
export const BODY_MAX_LENGTH: Readonly<Record<'text' | 'html', number>> = (() => {
  const properties = openapiDocument.components.schemas.Message.properties as Record<
    string,
    { maxLength?: number }
  >;
  const limit = (field: 'text' | 'html') => {
    const max = properties[field]?.maxLength;
    if (typeof max !== 'number') throw new Error(`openapi.json: Message.${field} has no maxLength`);
    return max;
  };
  return { text: limit('text'), html: limit('html') };
})();

function decodedBase64Length(s: string): number {
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  return Math.floor((s.length * 3) / 4) - pad;
}

function count(value: unknown): number {
  if (value === undefined || value === null) return 0;
  return Array.isArray(value) ? value.length : 1;
}

function crossFieldRules(body: Record<string, unknown>, now: number): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const present = (v: unknown) => v !== undefined && v !== null;
  if (!present(body.html) && !present(body.text))
    details.push({ field: 'body', code: 'body:required' });
  if (count(body.to) + count(body.cc) + count(body.bcc) > MESSAGE_LIMITS.maxRecipients) {
    details.push({ field: 'recipients', code: 'recipients:too_many' });
  }
  if (typeof body.scheduled_at === 'string') {
    const at = Date.parse(body.scheduled_at);
    // The schema admits shapes Date cannot place (a leap second): refuse rather than lose the time.
    if (!Number.isFinite(at)) details.push({ field: 'scheduled_at', code: 'scheduled_at:invalid' });
    else {
      if (at <= now) details.push({ field: 'scheduled_at', code: 'scheduled_at:too_soon' });
      else if (at > now + MESSAGE_LIMITS.maxScheduleAheadMs)
        details.push({ field: 'scheduled_at', code: 'scheduled_at:too_far' });
    }
  }
  if (Array.isArray(body.attachments)) {
    let total = 0;
    body.attachments.forEach((a: unknown, i) => {
      if (typeof a !== 'object' || a === null) return;
      const att = a as Record<string, unknown>;
      if (typeof att.content === 'string') {
        if (att.content.length % 4 === 1)
          details.push({ field: `attachments.${i}.content`, code: 'attachments:invalid_base64' });
        const size = decodedBase64Length(att.content);
        total += size;
        if (size > MESSAGE_LIMITS.maxAttachmentBytes)
          details.push({ field: `attachments.${i}.content`, code: 'attachments:too_large' });
      }
      if (
        att.disposition === 'inline' &&
        (att.content_id === undefined || att.content_id === null)
      ) {
        details.push({
          field: `attachments.${i}.content_id`,
          code: 'attachments:content_id_required',
        });
      }
    });
    if (total > MESSAGE_LIMITS.maxAttachmentsTotalBytes)
      details.push({ field: 'attachments', code: 'attachments:total_too_large' });
  }
  return details;
}

const ADDRESS_FIELDS = new Set(['from', 'to', 'cc', 'bcc', 'reply_to']);

/**
 * Text that is not text: a string (or a key) holding a lone UTF-16 surrogate, which no UTF-8
 * index or MIME file can store (`"\ud800"` in JSON), or, when the body was not valid UTF-8,
 * U+FFFD where the undecodable bytes were. Each is refused as the field's `invalid_value` (an
 * address as its `invalid_address`, at the address's position), never stored changed.
 */
function textDetails(
  body: Record<string, unknown>,
  skip: Set<string>,
  undecodable: boolean,
): ErrorDetail[] {
  const bad = (s: string) => !s.isWellFormed() || (undecodable && s.includes('\uFFFD'));
  // The paths (below `path`) of every string or key in `value` that is not text.
  const badPaths = (value: unknown, path: string[], out: string[][]): string[][] => {
    if (typeof value === 'string') {
      if (bad(value)) out.push(path);
    } else if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) badPaths(item, [...path, String(i)], out);
    } else if (typeof value === 'object' && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        if (bad(k)) out.push([...path, k]);
        else badPaths(v, [...path, k], out);
      }
    }
    return out;
  };
  const details: ErrorDetail[] = [];
  for (const [field, value] of Object.entries(body)) {
    if (skip.has(field)) continue;
    const found = badPaths(value, [field], []);
    if (found.length === 0) continue;
    if (ADDRESS_FIELDS.has(field)) {
      // An address is judged whole, at its position: `to.1`, or `from`.
      const positions = new Set(
        found.map((p) => (Array.isArray(value) ? p.slice(0, 2) : p.slice(0, 1)).join('.')),
      );
      for (const position of positions)
        details.push({ field: position, code: `${field}:invalid_address` });
    } else {
      for (const p of found) details.push({ field: p.join('.'), code: `${field}:invalid_value` });
    }
  }
  return details;
}

export type MessageCheck = { ok: true; message: Message } | { ok: false; details: Details };

/**
 * Every body rule of the contract's Message table: the compiled schema, then the cross-field
 * rules and the text rule (textDetails; `undecodable`: the body was not valid UTF-8, see
 * http/jsonBody). One entry per failing field; a field already failing the schema is not
 * reported twice.
 */
export function checkMessageBody(
  body: unknown,
  now: number,
  opts: { undecodable?: boolean } = {},
): MessageCheck {
  const schema = validateMessageBody(body);
  if (!schema.ok && schema.details[0]?.code === 'body:invalid_type') return schema;
  const record = body as Record<string, unknown>;
  const schemaDetails = schema.ok ? [] : schema.details;
  // A field the schema already failed is not reported twice (unknown keys name no rule's field).
  const failing = new Set(
    schemaDetails.filter((d) => d.code !== 'body:unknown_key').map((d) => d.field),
  );
  // Unknown keys are refused as such, whatever they hold.
  const unknown = new Set(
    schemaDetails.filter((d) => d.code === 'body:unknown_key').map((d) => d.field),
  );
  const extra = [
    ...crossFieldRules(record, now),
    ...textDetails(record, unknown, opts.undecodable === true),
  ].filter((d) => !failing.has(d.field));
  const details = [...schemaDetails, ...extra];
  if (details.length === 0) return { ok: true, message: record as unknown as Message };
  return { ok: false, details: details.sort(detailOrder) as Details };
}
