/** Public viewer tokens: an expiry and an HMAC-SHA256 of the message id (and link id) under the viewer key: unforgeable and unmovable. */
import { createHmac, timingSafeEqual } from 'node:crypto';

const TOKEN = /^([0-9a-z]{1,10})\.([A-Za-z0-9_-]{43})$/;

/** `inline`: only the inline parts, for the console's preview frame (an opaque origin sends no cookie). Each its own label. */
export type TokenPurpose = 'view' | 'inline';

const LABELS: Record<TokenPurpose, string> = {
  view: 'postern-view',
  inline: 'postern-inline-parts',
};

function signature(
  secret: Buffer,
  messageId: string,
  expiresSec: number,
  purpose: TokenPurpose,
  link = '',
): Buffer {
  return createHmac('sha256', secret)
    .update(`${LABELS[purpose]}\0${messageId}\0${expiresSec}${link === '' ? '' : `\0${link}`}`)
    .digest();
}

const LINK_TOKEN = /^([0-9a-z]{1,10})\.([0-9a-z]{16})\.([A-Za-z0-9_-]{43})$/;

export function viewerLinkToken(
  secret: Buffer,
  messageId: string,
  expiresAtMs: number,
  linkId: string,
): string {
  const expiresSec = Math.floor(expiresAtMs / 1000);
  const link = linkId.slice('vl.'.length);
  return `${expiresSec.toString(36)}.${link}.${signature(secret, messageId, expiresSec, 'view', link).toString('base64url')}`;
}

export function viewerLinkOf(
  secret: Buffer,
  messageId: string,
  token: string,
  nowMs: number,
): string | null {
  const m = LINK_TOKEN.exec(token);
  if (!m) return null;
  const expiresSec = parseInt(m[1], 36);
  const given = Buffer.from(m[3], 'base64url');
  const expected = signature(secret, messageId, expiresSec, 'view', m[2]);
  // Signature first, in constant time; the expiry only of a genuine token.
  return given.length === expected.length &&
    timingSafeEqual(given, expected) &&
    expiresSec * 1000 > nowMs
    ? `vl.${m[2]}`
    : null;
}

export function viewerToken(
  secret: Buffer,
  messageId: string,
  expiresAtMs: number,
  purpose: TokenPurpose = 'view',
): string {
  const expiresSec = Math.floor(expiresAtMs / 1000);
  return `${expiresSec.toString(36)}.${signature(secret, messageId, expiresSec, purpose).toString('base64url')}`;
}

export function viewerTokenValid(
  secret: Buffer,
  messageId: string,
  token: string,
  nowMs: number,
  purpose: TokenPurpose = 'view',
): boolean {
  const m = TOKEN.exec(token);
  if (!m) return false;
  const expiresSec = parseInt(m[1], 36);
  const given = Buffer.from(m[2], 'base64url');
  const expected = signature(secret, messageId, expiresSec, purpose);
  // Signature first, in constant time; the expiry only of a genuine token.
  return (
    given.length === expected.length &&
    timingSafeEqual(given, expected) &&
    expiresSec * 1000 > nowMs
  );
}
