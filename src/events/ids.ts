import { randomBytes } from 'node:crypto';

// Crockford base32, lower case, as the other ids.
const B32 = '0123456789abcdefghjkmnpqrstvwxyz';

// Random bytes are drawn in blocks: one call per ~170 delivery ids instead of one each.
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

/**
 * `we.` + 10 time characters + 14 random ones (70 bits): a delivery, stable across its retries.
 * Ids sort by creation, so the unique index grows at its right edge (a few pages per fan-out
 * transaction, not one random page per row).
 */
export function newDeliveryId(nowMs: number = Date.now()): string {
  return `we.${time32(nowMs)}${random32(14)}`;
}

/** `wh.` + 20 random base32 characters: a webhook endpoint. */
export function newEndpointId(): string {
  return `wh.${random32(20)}`;
}
