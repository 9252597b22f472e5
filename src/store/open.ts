/** Where a store's connections are opened, and so where its backend is chosen (store.backend). */
import type { Logger } from '../log.js';
import type { AcceptanceGroupStore } from './acceptanceGroups.js';
import { openDatabase } from './db.js';
import { postgresAcceptanceGroups } from './postgres/acceptanceGroups.js';
import { migratePostgres } from './postgres/migrate.js';
import { openPool, openPoolConnections } from './postgres/pool.js';
import { postgresQueries } from './postgres/queries.js';
import { type Queries, sqliteQueries } from './queries.js';

/** Plain data a worker thread can be given to open its own connection. */
export type StoreLocation =
  | { backend: 'sqlite'; stateDir: string }
  | { backend: 'postgres'; url: string; poolSize: number };

export interface StoreConnections {
  queries: Queries;
  close(): Promise<void>;
}

export interface SharedDatabase extends StoreConnections {
  acceptanceGroups: AcceptanceGroupStore;
}

export async function openSharedDatabase(
  location: Extract<StoreLocation, { backend: 'postgres' }>,
  logger: Logger,
  nodeId: string,
): Promise<SharedDatabase> {
  const pool = openPool(location.url, location.poolSize, logger, { name: nodeId, keepOpen: true });
  try {
    await migratePostgres(pool, logger);
    // Before the listeners open (and /readyz answers): the whole pool, kept open from then on.
    await openPoolConnections(pool, location.poolSize);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new Error(
      `cannot open the PostgreSQL store (store.postgres.url): ${(err as Error).message}`,
    );
  }
  return {
    queries: postgresQueries(pool),
    acceptanceGroups: postgresAcceptanceGroups(pool),
    close: () => pool.end(),
  };
}

/** Opened as needed: a command running one statement at a time uses one. */
export const THREAD_POOL_SIZE = 4;

/** A command may come before the first start, so it migrates the store as a node would. */
export async function openConnections(
  location: StoreLocation,
  logger: Logger,
  name: string,
  opts: { migrate?: boolean } = {},
): Promise<StoreConnections> {
  if (location.backend === 'sqlite') {
    const db = openDatabase(location.stateDir, logger, { migrate: opts.migrate ?? false });
    return {
      queries: sqliteQueries(db),
      close: async () => {
        db.close();
      },
    };
  }
  const pool = openPool(location.url, THREAD_POOL_SIZE, logger, { name });
  if (opts.migrate) {
    try {
      await migratePostgres(pool, logger);
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
  }
  return { queries: postgresQueries(pool), close: () => pool.end() };
}
