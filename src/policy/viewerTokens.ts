/**
 * Public viewer tokens: an expiry and an HMAC-SHA256 of the message id and that expiry under the
 * viewer's signing key (policy/viewerKey.ts). Nothing is stored per link: a token is valid while
 * its signature checks and its expiry is ahead.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const TOKEN = /^([0-9a-z]{1,10})\.([A-Za-z0-9_-]{43})$/;

/**
 * What a token opens: `view`, the public viewer's page of the message; `inline`, only the
 * message's inline parts, for the console's preview frame (whose opaque origin sends no
 * session cookie). Each is signed under its own label, so neither opens the other.
 */
export type TokenPurpose = 'view' | 'inline';

const LABELS: Record<TokenPurpose, string> = { view: 'postern-view', inline: 'postern-inline-parts' };

function signature(secret: Buffer, messageId: string, expiresSec: number, purpose: TokenPurpose): Buffer {
  return createHmac('sha256', secret).update(`${LABELS[purpose]}\0${messageId}\0${expiresSec}`).digest();
}

/** The token for `messageId` valid until `expiresAtMs` (rounded down to the second). */
export function viewerToken(secret: Buffer, messageId: string, expiresAtMs: number, purpose: TokenPurpose = 'view'): string {
  const expiresSec = Math.floor(expiresAtMs / 1000);
  return `${expiresSec.toString(36)}.${signature(secret, messageId, expiresSec, purpose).toString('base64url')}`;
}

/** Whether `token` was made for `messageId` and `purpose` under `secret` and has not expired at `nowMs`. */
export function viewerTokenValid(secret: Buffer, messageId: string, token: string, nowMs: number, purpose: TokenPurpose = 'view'): boolean {
  const m = TOKEN.exec(token);
  if (!m) return false;
  const expiresSec = parseInt(m[1], 36);
  const given = Buffer.from(m[2], 'base64url');
  const expected = signature(secret, messageId, expiresSec, purpose);
  // Signature first, in constant time; the expiry only of a genuine token.
  return given.length === expected.length && timingSafeEqual(given, expected) && expiresSec * 1000 > nowMs;
}
