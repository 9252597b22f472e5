import type { Pool } from 'pg';
import { bigintNumber } from './bigintNumber.js';

/**
 * Provider throttles shared by the nodes (provider_throttles, migration 10): an account a
 * provider asked to wait (a 429 with reset headers) rests on every node, not only on the one
 * that was told, so three nodes do not hit a throttled provider three times as hard. The
 * PostgreSQL twin of the scheduler's in-memory `throttledUntil`; not yet wired to it (issue 23).
 */

/**
 * Rests `accountId` until `until`, or later if a node already rested it longer: two nodes told
 * different resets keep the later one, whatever order their writes land in (the upsert takes
 * the row's lock, so the comparison and the write are one step). Returns the account's
 * resting time as stored.
 */
export async function throttleAccount(pool: Pool, accountId: string, until: number): Promise<number> {
  const result = await pool.query<{ until: string }>(
    `INSERT INTO provider_throttles (account_id, until) VALUES ($1, $2::bigint)
     ON CONFLICT (account_id) DO UPDATE SET until = GREATEST(provider_throttles.until, excluded.until)
     RETURNING until`,
    [accountId, until],
  );
  return bigintNumber(result.rows[0]!.until, 'provider_throttles.until');
}

/** The accounts resting at `now`, each with the time it may be tried again. */
export async function throttledAccounts(pool: Pool, now: number): Promise<Map<string, number>> {
  const result = await pool.query<{ account_id: string; until: string }>('SELECT account_id, until FROM provider_throttles WHERE until > $1::bigint', [now]);
  return new Map(result.rows.map((r) => [r.account_id, bigintNumber(r.until, 'provider_throttles.until')]));
}
