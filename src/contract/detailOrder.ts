import type { ErrorDetail } from './errors.js';

/** The order of `details`: the Message table's field order; body-level rules sit by their fields. */
const FIELD_ORDER = [
  'from',
  'to',
  'cc',
  'bcc',
  'recipients',
  'reply_to',
  'subject',
  'html',
  'text',
  'body',
  'headers',
  'attachments',
  'tags',
  'metadata',
  'category',
  'scheduled_at',
  'paused',
  'routing',
  'provider_options',
  'messages',
];

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
