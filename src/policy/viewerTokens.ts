/**
 * Public viewer tokens: an expiry and an HMAC-SHA256 of the message id and that expiry under a
 * key kept in the state directory. Nothing is stored per link: a token is valid while its
 * signature checks and its expiry is ahead.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';

const SECRET_FILE = 'viewer.key';
const SECRET_BYTES = 32;
const TOKEN = /^([0-9a-z]{1,10})\.([A-Za-z0-9_-]{43})$/;

/**
 * The signing key: created at first use in the state directory (0600, never replaced), read
 * afterwards. The server and the CLI both call this; whichever comes first creates it (`wx`:
 * the other reads what the first wrote).
 */
export function viewerSecret(stateDir: string): Buffer {
  const file = path.join(stateDir, SECRET_FILE);
  try {
    const fd = openSync(file, 'wx', 0o600);
    try {
      const secret = randomBytes(SECRET_BYTES);
      writeSync(fd, secret.toString('hex'));
      return secret;
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const text = readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(text)) throw new Error(`${file} is not a viewer key (64 hex digits); remove it to create a new one (old links stop working)`);
  return Buffer.from(text, 'hex');
}

function signature(secret: Buffer, messageId: string, expiresSec: number): Buffer {
  return createHmac('sha256', secret).update(`postern-view\0${messageId}\0${expiresSec}`).digest();
}

/** The token for `messageId` valid until `expiresAtMs` (rounded down to the second). */
export function viewerToken(secret: Buffer, messageId: string, expiresAtMs: number): string {
  const expiresSec = Math.floor(expiresAtMs / 1000);
  return `${expiresSec.toString(36)}.${signature(secret, messageId, expiresSec).toString('base64url')}`;
}

/** Whether `token` was made for `messageId` under `secret` and has not expired at `nowMs`. */
export function viewerTokenValid(secret: Buffer, messageId: string, token: string, nowMs: number): boolean {
  const m = TOKEN.exec(token);
  if (!m) return false;
  const expiresSec = parseInt(m[1], 36);
  const given = Buffer.from(m[2], 'base64url');
  const expected = signature(secret, messageId, expiresSec);
  // Signature first, in constant time; the expiry only of a genuine token.
  return given.length === expected.length && timingSafeEqual(given, expected) && expiresSec * 1000 > nowMs;
}
