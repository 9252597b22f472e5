import type { Queries } from './queries.js';

/**
 * Sliding windows several nodes count together, exactly as policy/rateLimiter.ts does in memory: one call of
 * the PL/pgSQL `rate_window_write` under the key's row lock (why: docs/scaling.md#rate-windows-on-postgresql).
 * Not inside a transaction: the row lock lasts until commit and every node's takes of that key wait for it.
 */

/** A new limit or window counts in a window of its own. */
export interface RateWindowLimit {
  /** Which limiter ('send', 'viewer_ip', …): limiters never share a window, even for one key. */
  limiter: string;
  maxEvents: number;
  windowMs: number;
}

function postgresOnly(q: Queries): void {
  if (q.dialect !== 'postgres')
    throw new Error(
      'rate windows are shared through PostgreSQL; a single node counts them in memory (policy/rateLimiter.ts)',
    );
}

// Also the policy generation in the statement's snapshot: admission checks cached policy against it.
const TAKE = `SELECT wait_ms, slot_window, slot_write, (SELECT n FROM policy_generation WHERE id = 1) AS policy_generation
  FROM rate_window_write(@limiter, @maxEvents, @windowMs, @key, @now, @always)`;

export interface RateWindowSlot {
  window: number;
  write: number;
}

export type RateWindowTaken = (
  | { waitMs: 0; slot: RateWindowSlot }
  | { waitMs: number; slot: null }
) & { policyGeneration: number };

async function callWrite(
  q: Queries,
  limit: RateWindowLimit,
  key: string,
  now: number,
  always: boolean,
): Promise<RateWindowTaken> {
  postgresOnly(q);
  const row = await q.get<{
    wait_ms: number;
    slot_window: number | null;
    slot_write: number | null;
    policy_generation: number;
  }>(TAKE, {
    limiter: limit.limiter,
    maxEvents: limit.maxEvents,
    windowMs: limit.windowMs,
    key,
    now,
    always,
  });
  const { wait_ms, slot_window, slot_write, policy_generation: policyGeneration } = row!;
  if (wait_ms > 0 || slot_window === null || slot_write === null)
    return { waitMs: wait_ms, slot: null, policyGeneration };
  return { waitMs: 0, slot: { window: slot_window, write: slot_write }, policyGeneration };
}

export function takeRateWindow(
  q: Queries,
  limit: RateWindowLimit,
  key: string,
  now: number,
): Promise<RateWindowTaken> {
  return callWrite(q, limit, key, now, false);
}

/** Records an event whatever its window holds (the oldest gives way). */
export async function recordRateWindow(
  q: Queries,
  limit: RateWindowLimit,
  key: string,
  now: number,
): Promise<void> {
  await callWrite(q, limit, key, now, true);
}

/** Gives back the event `slot` names, as if it had not happened, while the ring still holds it. Whether it was. */
export async function releaseRateWindow(
  q: Queries,
  limit: RateWindowLimit,
  key: string,
  slot: RateWindowSlot,
): Promise<boolean> {
  postgresOnly(q);
  // A boolean arrives as 1 or 0 (SQLite's shapes).
  const row = await q.get<{ released: number }>(
    'SELECT rate_window_release(@window, @limiter, @key, @write) AS released',
    {
      window: slot.window,
      limiter: limit.limiter,
      key,
      write: slot.write,
    },
  );
  return row!.released === 1;
}

/** A read without lock: a take on another node may change the answer the moment after. */
export async function rateWindowWait(
  q: Queries,
  limit: RateWindowLimit,
  key: string,
  now: number,
): Promise<number> {
  postgresOnly(q);
  const row = await q.get<{ wait_ms: number }>(
    `SELECT CASE WHEN w.filled < w.max_events THEN 0 ELSE GREATEST(0, s.at + w.window_ms - @now) END AS wait_ms
     FROM rate_windows w JOIN rate_window_slots s ON s.window_id = w.id AND s.slot = w.next_slot
     WHERE w.limiter = @limiter AND w.max_events = @maxEvents AND w.window_ms = @windowMs AND w.key = @key`,
    { limiter: limit.limiter, maxEvents: limit.maxEvents, windowMs: limit.windowMs, key, now },
  );
  return row?.wait_ms ?? 0;
}

/** Deletes `limiter`'s windows whose newest event has left them; how many. A racing take either renews the row first or starts afresh. */
export async function pruneRateWindows(q: Queries, limiter: string, now: number): Promise<number> {
  postgresOnly(q);
  const row = await q.get<{ windows: number }>(
    `WITH pruned AS (DELETE FROM rate_windows WHERE limiter = @limiter AND expires_at <= @now RETURNING id),
       slots AS (DELETE FROM rate_window_slots WHERE window_id IN (SELECT id FROM pruned))
     SELECT count(*) AS windows FROM pruned`,
    { limiter, now },
  );
  return row!.windows;
}
