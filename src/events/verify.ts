/**
 * Verifying a Postern webhook delivery (receiver side). Self-contained (node:crypto only) so a
 * receiver can copy this file as it is.
 *
 *   X-Service-Signature: t=1767225600,v1=5f1c…[,v1=…]
 *
 * 1. HMAC-SHA256, keyed with the endpoint's secret (the whole `whsec_…` string), over
 *    `<t>.<raw body>` — the raw bytes of the request body, before any JSON parsing.
 * 2. Compare in constant time with each `v1` entry: during a secret rotation Postern signs with
 *    the new and the previous secret, so either may match; so may either of the secrets a
 *    receiver holds while it rolls over.
 * 3. Refuse a timestamp further than the tolerance (default 300 s) from now, either way, so a
 *    captured request cannot be replayed later.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface VerifyOptions {
  /** Largest accepted distance between `t` and now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Now, in milliseconds since the epoch (default `Date.now()`). */
  now?: number;
}

export type VerifyResult =
  | { ok: true; timestamp: number }
  | { ok: false; reason: 'missing_header' | 'malformed_header' | 'no_secret' | 'stale_timestamp' | 'signature_mismatch' };

/** The `t` and every `v1` of a signature header, or null when it is malformed. */
export function parseSignatureHeader(header: string): { timestamp: number; signatures: string[] } | null {
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

/** Verifies a delivery and says why it failed. `secrets`: the endpoint's secret(s), `whsec_…`. */
export function checkWebhookSignature(rawBody: string | Uint8Array, header: string | null | undefined, secrets: string | readonly string[], opts: VerifyOptions = {}): VerifyResult {
  if (!header) return { ok: false, reason: 'missing_header' };
  const parsed = parseSignatureHeader(header);
  if (!parsed) return { ok: false, reason: 'malformed_header' };
  const keys = (typeof secrets === 'string' ? [secrets] : [...secrets]).filter((s) => s.length > 0);
  if (keys.length === 0) return { ok: false, reason: 'no_secret' };
  const tolerance = opts.toleranceSeconds ?? 300;
  const nowSeconds = Math.floor((opts.now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - parsed.timestamp) > tolerance) return { ok: false, reason: 'stale_timestamp' };
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  const received = parsed.signatures.map((s) => Buffer.from(s, 'hex'));
  let match = false;
  for (const key of keys) {
    const expected = createHmac('sha256', key).update(`${parsed.timestamp}.`).update(body).digest();
    // Every pair is compared (no early exit), each in constant time; all are 32 bytes.
    for (const sig of received) if (timingSafeEqual(expected, sig)) match = true;
  }
  return match ? { ok: true, timestamp: parsed.timestamp } : { ok: false, reason: 'signature_mismatch' };
}

/** True when `header` carries a valid, fresh signature of `rawBody` by one of `secrets`. */
export function verifyWebhookSignature(rawBody: string | Uint8Array, header: string | null | undefined, secrets: string | readonly string[], opts: VerifyOptions = {}): boolean {
  return checkWebhookSignature(rawBody, header, secrets, opts).ok;
}
