/**
 * Verifying a Postern webhook delivery, receiver side (docs/webhooks.md#verifying-a-delivery). node:crypto only, so a
 * receiver can copy this file: HMAC-SHA256 over `<t>.<raw body>`, compared in constant time with each `v1`, `t` within tolerance.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface VerifyOptions {
  toleranceSeconds?: number;
  now?: number;
}

export type VerifyResult =
  | { ok: true; timestamp: number }
  | {
      ok: false;
      reason:
        | 'missing_header'
        | 'malformed_header'
        | 'no_secret'
        | 'stale_timestamp'
        | 'signature_mismatch';
    };

export function parseSignatureHeader(
  header: string,
): { timestamp: number; signatures: string[] } | null {
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) return null;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (timestamp !== null || !/^\d{1,12}$/.test(value)) return null;
      timestamp = Number(value);
    } else if (key === 'v1') {
      if (/^[0-9a-f]{64}$/i.test(value)) signatures.push(value.toLowerCase());
    }
    // Other schemes (v0, a future v2) are ignored, so verifiers keep working when one is added.
  }
  return timestamp === null || signatures.length === 0 ? null : { timestamp, signatures };
}

export function checkWebhookSignature(
  rawBody: string | Uint8Array,
  header: string | null | undefined,
  secrets: string | readonly string[],
  opts: VerifyOptions = {},
): VerifyResult {
  if (!header) return { ok: false, reason: 'missing_header' };
  const parsed = parseSignatureHeader(header);
  if (!parsed) return { ok: false, reason: 'malformed_header' };
  const keys = (typeof secrets === 'string' ? [secrets] : [...secrets]).filter((s) => s.length > 0);
  if (keys.length === 0) return { ok: false, reason: 'no_secret' };
  const tolerance = opts.toleranceSeconds ?? 300;
  const nowSeconds = Math.floor((opts.now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - parsed.timestamp) > tolerance)
    return { ok: false, reason: 'stale_timestamp' };
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  const received = parsed.signatures.map((s) => Buffer.from(s, 'hex'));
  let match = false;
  for (const key of keys) {
    const expected = createHmac('sha256', key).update(`${parsed.timestamp}.`).update(body).digest();
    // Every pair is compared (no early exit), each in constant time.
    for (const sig of received) if (timingSafeEqual(expected, sig)) match = true;
  }
  return match
    ? { ok: true, timestamp: parsed.timestamp }
    : { ok: false, reason: 'signature_mismatch' };
}

export function verifyWebhookSignature(
  rawBody: string | Uint8Array,
  header: string | null | undefined,
  secrets: string | readonly string[],
  opts: VerifyOptions = {},
): boolean {
  return checkWebhookSignature(rawBody, header, secrets, opts).ok;
}
