import type { Queries } from './queries.js';

/**
 * Sliding windows several nodes count together (CLUSTER.md: "a node may not admit what the
 * cluster's window no longer allows"): the PostgreSQL twin of policy/rateLimiter.ts, counting
 * exactly as it does (at most `maxEvents` per `windowMs` per key, the last `maxEvents` event
 * times kept as a ring), in the tables of migration 11 and the functions of migration 14.
 *
 * Why this shape. Exactness needs each key's takes to run one at a time on a state that
 * includes every event recorded before: a lock, then reads that see past it. One statement
 * cannot do both under READ COMMITTED (its snapshot predates the lock it waits for, so the
 * events a concurrent take committed meanwhile would be missed), and a transaction of several
 * statements costs several round trips. So a take is one call of `rate_window_write`, a
 * PL/pgSQL function whose statements each read afresh: it locks the key's row (FOR UPDATE: the
 * lock is the row's, not an advisory lock on a hash, so unrelated keys never share one), reads
 * the oldest slot and writes at most one slot and the row. Every step is a primary-key lookup,
 * whatever the limit; a ring held in one BYTEA (a single upsert statement, tried first) is
 * rewritten whole by each take, which costs 1.5 ms at a limit of 10 000 and bloats its TOAST.
 * The tables are UNLOGGED: a window is what a node's memory held before, so a take writes no
 * WAL and its commit waits for no flush; a server crash or failover empties them, and windows
 * start afresh as when a single node restarts.
 *
 * A take names the event it wrote (the window's row id and the event's number in it), so that
 * a sign-in whose password was right can give its place back (`releaseRateWindow`: one call of
 * `rate_window_release`, under the same row lock), keeping the ring in order (migration 14).
 *
 * Times are the callers' (each node's injected clock): nodes' clocks must agree (NTP) to the
 * precision the windows need. Called on the pool's Queries, not inside a transaction: a take's
 * row lock lasts until its commit, and every node's takes of that key wait for it. SQLite has
 * the tables, unused: one node counts in memory.
 */

/** A limiter and its configuration: a new limit or window counts in a window of its own. */
export interface RateWindowLimit {
  /** Which limiter ('send', 'viewer_ip', 'console_sign_in_account', …): limiters never share a window, even for one key. */
  limiter: string;
  maxEvents: number;
  windowMs: number;
}

function postgresOnly(q: Queries): void {
  if (q.dialect !== 'postgres') throw new Error('rate windows are shared through PostgreSQL; a single node counts them in memory (policy/rateLimiter.ts)');
}

const TAKE = 'SELECT wait_ms, slot_window, slot_write FROM rate_window_write(@limiter, @maxEvents, @windowMs, @key, @now, @always)';

/** Which event an admitted take wrote (policy/rateWindow.ts's RateSlot): the window's row id and the event's number in it. */
export interface RateWindowSlot {
  window: number;
  write: number;
}

/** A take's answer: the wait in ms (0 = recorded), and which event it wrote when recorded. */
export type RateWindowTaken = { waitMs: 0; slot: RateWindowSlot } | { waitMs: number; slot: null };

async function callWrite(q: Queries, limit: RateWindowLimit, key: string, now: number, always: boolean): Promise<RateWindowTaken> {
  postgresOnly(q);
  const row = await q.get<{ wait_ms: number; slot_window: number | null; slot_write: number | null }>(TAKE, {
    limiter: limit.limiter,
    maxEvents: limit.maxEvents,
    windowMs: limit.windowMs,
    key,
    now,
    always,
  });
  const { wait_ms, slot_window, slot_write } = row!;
  if (wait_ms > 0 || slot_window === null || slot_write === null) return { waitMs: wait_ms, slot: null };
  return { waitMs: 0, slot: { window: slot_window, write: slot_write } };
}

/** Records an event for `key` at `now` unless its window is full; the wait in ms (0 = recorded) and which event it is. */
export function takeRateWindow(q: Queries, limit: RateWindowLimit, key: string, now: number): Promise<RateWindowTaken> {
  return callWrite(q, limit, key, now, false);
}

/** Records an event for `key` at `now` whatever its window holds (the oldest gives way). */
export async function recordRateWindow(q: Queries, limit: RateWindowLimit, key: string, now: number): Promise<void> {
  await callWrite(q, limit, key, now, true);
}

/**
 * Gives back the event `slot` names in `key`'s window, as if it had not happened (the events
 * before it move one slot newer, the oldest slot is left free). Only while the ring still holds
 * it: not once a later take has taken its slot over, nor after the window was pruned and
 * started afresh. Whether it was given back.
 */
export async function releaseRateWindow(q: Queries, limit: RateWindowLimit, key: string, slot: RateWindowSlot): Promise<boolean> {
  postgresOnly(q);
  // A boolean arrives as 1 or 0 (postgres/queries.ts: SQLite's shapes).
  const row = await q.get<{ released: number }>('SELECT rate_window_release(@window, @limiter, @key, @write) AS released', {
    window: slot.window,
    limiter: limit.limiter,
    key,
    write: slot.write,
  });
  return row!.released === 1;
}

/**
 * Milliseconds until `key` may have another event; 0 when it may now. A read: it takes no lock,
 * so a take on another node may change the answer the moment after, as in memory between a
 * check and a later record.
 */
export async function rateWindowWait(q: Queries, limit: RateWindowLimit, key: string, now: number): Promise<number> {
  postgresOnly(q);
  const row = await q.get<{ wait_ms: number }>(
    `SELECT CASE WHEN w.filled < w.max_events THEN 0 ELSE GREATEST(0, s.at + w.window_ms - @now) END AS wait_ms
     FROM rate_windows w JOIN rate_window_slots s ON s.window_id = w.id AND s.slot = w.next_slot
     WHERE w.limiter = @limiter AND w.max_events = @maxEvents AND w.window_ms = @windowMs AND w.key = @key`,
    { limiter: limit.limiter, maxEvents: limit.maxEvents, windowMs: limit.windowMs, key, now },
  );
  return row?.wait_ms ?? 0;
}

/**
 * Deletes the windows of `limiter` (any configuration) whose newest event has left them, with
 * their slots; returns how many windows. A take racing it either locked the row first (the
 * delete then finds it renewed and keeps it) or waits and starts the key afresh.
 */
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
