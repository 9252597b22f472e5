import { DatabaseUnavailable, databaseUnavailable } from '../store/databaseUnavailable.js';
import { backendOf } from '../store/backendOf.js';
import type { Queries } from '../store/queries.js';
import { applyBookkeeping, committedDurably, type Bookkeeping, type BookkeepingKind, type BookkeepingOutcome, type BookkeepingRequest, type BookkeepingResults, type BookkeepingWork } from './bookkeepingChannel.js';

/**
 * Bookkeeping on the writer's own connections, each write one transaction of its own, where the
 * database serialises what must be (row locks, SKIP LOCKED leases: the shared PostgreSQL), so
 * writers need no single writer thread as SQLite's index does (BookkeepingClient). The same rule
 * as the index writer's for the flush: writes whose loss only repeats work commit without
 * waiting for it (the store's CommitDurability), the rest wait (committedDurably), with one
 * more here (durableHere). A write that fails because the database went away is refused as
 * DatabaseUnavailable: its commit may have landed (the connection cut as it committed).
 */
export class DirectBookkeeping implements Bookkeeping {
  readonly sharedByNodes = true;

  constructor(private readonly store: Queries) {}

  async write<K extends BookkeepingKind>(kind: K, work: BookkeepingWork[K]): Promise<BookkeepingOutcome<K>> {
    const request = { seq: 0, kind, work } as BookkeepingRequest;
    let result: BookkeepingResults[BookkeepingKind];
    try {
      result = await this.store.transaction(async (tx) => {
        if (!committedDurably(request) && !durableHere(request)) await backendOf(tx).commits.withoutFlush(tx);
        return applyBookkeeping(tx, request);
      });
    } catch (err) {
      // The writer may keep this work and try it again once the database is back (its commit may have landed).
      throw databaseUnavailable(err) ? new DatabaseUnavailable(err as Error) : err;
    }
    // Acceptance commits run on their own connections: nothing here waits behind them.
    return { result: result as BookkeepingResults[K], acceptanceBusy: false };
  }

  inDoubt(err: unknown): boolean {
    return err instanceof DatabaseUnavailable;
  }

  close(): void {}
}

/**
 * A database on its own server can crash and recover while the node lives on (the SQLite index
 * cannot lose a commit without its node), and an unflushed commit is then gone while the node
 * acts on it. A delivery
 * exchange that leases messages (or takes them back) or ends hand-offs therefore waits for its
 * flush: a lease lost after its hand-off began puts the message back in the queue for a second
 * hand-off, and an end lost leaves a message sent `sending` until its lease runs out and it is
 * sent again. An exchange that leased nothing and ended nothing writes no WAL, so waits for none.
 */
function durableHere(request: BookkeepingRequest): boolean {
  if (request.kind !== 'delivery') return false;
  const { lease, reclaim, writes } = request.work;
  return lease !== null || reclaim !== null || writes.some((w) => w.kind === 'finish');
}
