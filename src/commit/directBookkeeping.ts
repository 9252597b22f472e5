import { backendOf } from '../store/backendOf.js';
import { DatabaseUnavailable, databaseUnavailable } from '../store/databaseUnavailable.js';
import type { Queries } from '../store/queries.js';
import {
  applyBookkeeping,
  type Bookkeeping,
  type BookkeepingKind,
  type BookkeepingOutcome,
  type BookkeepingRequest,
  type BookkeepingResults,
  type BookkeepingWork,
  committedDurably,
} from './bookkeepingChannel.js';

/**
 * Bookkeeping on the writer's own connections (PostgreSQL serialises with row locks and SKIP LOCKED, so no writer thread).
 * A write failing because the database went away is DatabaseUnavailable: its commit may have landed.
 */
export class DirectBookkeeping implements Bookkeeping {
  readonly sharedByNodes = true;

  constructor(private readonly store: Queries) {}

  async write<K extends BookkeepingKind>(
    kind: K,
    work: BookkeepingWork[K],
  ): Promise<BookkeepingOutcome<K>> {
    const request = { seq: 0, kind, work } as BookkeepingRequest;
    let result: BookkeepingResults[BookkeepingKind];
    try {
      result = await this.store.transaction(async (tx) => {
        if (!committedDurably(request) && !durableHere(request))
          await backendOf(tx).commits.withoutFlush(tx);
        return applyBookkeeping(tx, request);
      });
    } catch (err) {
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

/** A separate database can lose an unflushed commit the node acts on: leases and ends wait for their flush (docs/scaling.md). */
function durableHere(request: BookkeepingRequest): boolean {
  if (request.kind !== 'delivery') return false;
  const { lease, reclaim, writes } = request.work;
  return lease !== null || reclaim !== null || writes.some((w) => w.kind === 'finish');
}
