import { randomBytes, randomInt } from 'node:crypto';

// Crockford base32, lower case: readable, no ambiguous letters, sorts like the numbers it encodes.
const B32 = '0123456789abcdefghjkmnpqrstvwxyz';

function random32(n: number): string {
  const bytes = randomBytes(n);
  let out = '';
  for (let i = 0; i < n; i++) out += B32[bytes[i] & 31];
  return out;
}

function time32(ms: number): string {
  let out = '';
  let t = Math.floor(ms);
  for (let i = 0; i < 10; i++) {
    out = B32[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return out;
}

/** `m.` + 10 time characters + 16 random ones: unique, and ids sort by acceptance time. */
export function newMessageId(nowMs: number): string {
  return `m.${time32(nowMs)}${random32(16)}`;
}

export function newProjectId(): string {
  return `p.${random32(20)}`;
}

export function newKeyId(): string {
  return `k.${random32(16)}`;
}

export function newProviderAccountId(): string {
  return `pa.${random32(16)}`;
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** 40 uniformly chosen alphanumerics (about 238 bits). */
export function randomAlphanumeric(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALNUM[randomInt(ALNUM.length)];
  return out;
}
