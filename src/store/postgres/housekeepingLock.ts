import type { Queries } from '../queries.js';

/**
 * The transaction-level advisory lock (Postern's constant "PSTNHK"; migrations use "PSTN", the
 * webhook outbox "PSTNWH") under which one node at a time prunes or sweeps. A node that does not
 * get it skips that round: another node is doing the same work at that moment, and the next
 * round (an hour later) comes anyway.
 */
export const HOUSEKEEPING_LOCK = 0x5053544e484b;

/** Whether this transaction got HOUSEKEEPING_LOCK (held until it ends). */
export async function takeHousekeepingTurn(q: Queries): Promise<boolean> {
  return (
    (
      await q.get<{ locked: number }>('SELECT pg_try_advisory_xact_lock(@key) AS locked', {
        key: HOUSEKEEPING_LOCK,
      })
    )?.locked === 1
  );
}
