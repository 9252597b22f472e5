import { randomBytes, randomInt } from 'node:crypto';

// Crockford base32, lower case: readable, no ambiguous letters, sorts like the numbers it encodes.
const B32 = '0123456789abcdefghjkmnpqrstvwxyz';

// Random bytes are drawn in blocks: one call per ~200 ids instead of one each (ids are minted
// on hot paths: every accepted message, every webhook delivery).
let pool = Buffer.alloc(0);
let used = 0;

function random32(n: number): string {
  if (used + n > pool.length) {
    pool = randomBytes(4096);
    used = 0;
  }
  let out = '';
  for (let i = 0; i < n; i++) out += B32[pool[used + i] & 31];
  // Never reused: each id consumes its own bytes.
  used += n;
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

/** The smallest message id minted at `nowMs` or later: message ids sort by their time. */
export function messageIdFloor(nowMs: number): string {
  return `m.${time32(Math.max(0, nowMs))}`;
}

/**
 * `we.` + 10 time characters + 14 random ones (70 bits): a webhook delivery, stable across its
 * retries. Ids sort by creation, so the unique index grows at its right edge (a few pages per
 * fan-out transaction, not one random page per row).
 */
export function newDeliveryId(nowMs: number = Date.now()): string {
  return `we.${time32(nowMs)}${random32(14)}`;
}

/** `wh.` + 20 random base32 characters: a webhook endpoint. */
export function newEndpointId(): string {
  return `wh.${random32(20)}`;
}

/** `vl.` + 16 random base32 characters: a public viewer link (its token names it). */
export function newViewerLinkId(): string {
  return `vl.${random32(16)}`;
}

export function newProjectId(): string {
  return `p.${random32(20)}`;
}

export function newKeyId(): string {
  return `k.${random32(16)}`;
}

/** `op.` + 16 random base32 characters: a console operator. */
export function newOperatorId(): string {
  return `op.${random32(16)}`;
}

/** `ot.` + 16 random base32 characters: an operator's API token (its id, not the token). */
export function newOperatorTokenId(): string {
  return `ot.${random32(16)}`;
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
