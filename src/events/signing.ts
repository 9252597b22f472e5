import { createHmac, randomBytes } from 'node:crypto';

/** Secret prefix of the contract. */
export const SECRET_PREFIX = 'whsec_';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * `whsec_` + 43 alphanumerics (about 256 random bits, rejection-sampled so every character is
 * uniform). The HMAC key is the whole string as printed, prefix included.
 */
export function newWebhookSecret(): string {
  let out = SECRET_PREFIX;
  while (out.length < SECRET_PREFIX.length + 43) {
    for (const byte of randomBytes(64)) {
      // 248 = 4 × 62: bytes above it would favour the first letters.
      if (byte < 248 && out.length < SECRET_PREFIX.length + 43) out += ALNUM[byte % 62];
    }
  }
  return out;
}

/** Hex HMAC-SHA256 with `secret` over `<t>.<body>`, the body as the raw bytes sent. */
export function signatureV1(secret: string, timestamp: number, body: Uint8Array): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

/**
 * The `X-Service-Signature` value: `t=<unix seconds>,v1=<hex>` with one `v1` per secret, the
 * current secret first (during a rotation the previous one follows, until it expires).
 */
export function signatureHeader(
  body: Uint8Array,
  timestamp: number,
  secrets: readonly string[],
): string {
  return [`t=${timestamp}`, ...secrets.map((s) => `v1=${signatureV1(s, timestamp, body)}`)].join(
    ',',
  );
}
