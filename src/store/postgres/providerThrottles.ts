import type { Pool } from 'pg';
import type { Queries } from '../queries.js';
import { postgresQueries } from './queries.js';

/**
 * Provider throttles shared by the nodes (provider_throttles, migration 10): an account a
 * provider asked to wait (a 429 with reset headers) rests on every node, not only on the one
 * that was told, so three nodes do not hit a throttled provider three times as hard. The
 * PostgreSQL twin of the scheduler's in-memory `throttledUntil` (which stays the only record
 * on SQLite, one node): the scheduler records a throttle here and reads the resting accounts
 * with each lease. Takes the store's Queries, or a pool (tests).
 */

const queriesOf = (source: Pool | Queries): Queries =>
  'dialect' in source ? source : postgresQueries(source);

/**
 * Rests `accountId` until `until`, or later if a node already rested it longer: two nodes told
 * different resets keep the later one, whatever order their writes land in (the upsert takes
 * the row's lock, so the comparison and the write are one step). Returns the account's
 * resting time as stored.
 */
export async function throttleAccount(
  source: Pool | Queries,
  accountId: string,
  until: number,
): Promise<number> {
  const row = await queriesOf(source).get<{ until: number }>(
    `INSERT INTO provider_throttles (account_id, until) VALUES (?, CAST(? AS BIGINT))
     ON CONFLICT (account_id) DO UPDATE SET until = GREATEST(provider_throttles.until, excluded.until)
     RETURNING until`,
    accountId,
    until,
  );
  return row!.until;
}

/** The accounts resting at `now`, each with the time it may be tried again. */
export async function throttledAccounts(
  source: Pool | Queries,
  now: number,
): Promise<Map<string, number>> {
  const rows = await queriesOf(source).all<{ account_id: string; until: number }>(
    'SELECT account_id, until FROM provider_throttles WHERE until > CAST(? AS BIGINT)',
    now,
  );
  return new Map(rows.map((r) => [r.account_id, r.until]));
}
