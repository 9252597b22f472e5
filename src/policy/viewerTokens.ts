/**
 * Public viewer tokens: an expiry and an HMAC-SHA256 of the message id and that expiry under the
 * viewer's signing key (policy/viewerKey.ts). A viewer link's token also names its link
 * (`<expiry>.<link>.<signature>`, the link id signed with the rest), so that the link can be
 * looked up and revoked (store/viewerLinks.ts); a token cannot be forged nor moved to another
 * message or link.
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

function signature(secret: Buffer, messageId: string, expiresSec: number, purpose: TokenPurpose, link = ''): Buffer {
  return createHmac('sha256', secret).update(`${LABELS[purpose]}\0${messageId}\0${expiresSec}${link === '' ? '' : `\0${link}`}`).digest();
}

const LINK_TOKEN = /^([0-9a-z]{1,10})\.([0-9a-z]{16})\.([A-Za-z0-9_-]{43})$/;

/** A viewer link's token: `messageId` until `expiresAtMs` (rounded down to the second), naming `linkId` (`vl.…`). */
export function viewerLinkToken(secret: Buffer, messageId: string, expiresAtMs: number, linkId: string): string {
  const expiresSec = Math.floor(expiresAtMs / 1000);
  const link = linkId.slice('vl.'.length);
  return `${expiresSec.toString(36)}.${link}.${signature(secret, messageId, expiresSec, 'view', link).toString('base64url')}`;
}

/** The link (`vl.…`) a genuine, unexpired viewer link token for `messageId` names; null for anything else. */
export function viewerLinkOf(secret: Buffer, messageId: string, token: string, nowMs: number): string | null {
  const m = LINK_TOKEN.exec(token);
  if (!m) return null;
  const expiresSec = parseInt(m[1], 36);
  const given = Buffer.from(m[3], 'base64url');
  const expected = signature(secret, messageId, expiresSec, 'view', m[2]);
  // Signature first, in constant time; the expiry only of a genuine token.
  return given.length === expected.length && timingSafeEqual(given, expected) && expiresSec * 1000 > nowMs ? `vl.${m[2]}` : null;
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
