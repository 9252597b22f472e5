import type { MessagePort } from 'node:worker_threads';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import type { MetricsSnapshot } from '../platform/metrics.js';
import type { LimitSettings } from '../policy/usageLimits.js';
import type { PendingSpoolFile } from '../spool/publish.js';
import type { SpoolSync } from '../spool/syncFilesystem.js';
import { type Db, openDatabase } from '../store/db.js';
import { openConnections, openSharedDatabase, type StoreLocation } from '../store/open.js';
import { type Queries, sqliteQueries } from '../store/queries.js';
import type { AcceptanceOutcome, AcceptanceRecord } from './acceptance.js';
import { AcceptanceGroupWriter } from './acceptanceGroupWriter.js';
import { type Bookkeeping, BookkeepingClient } from './bookkeepingChannel.js';
import { DirectBookkeeping } from './directBookkeeping.js';
import { IndexWriter } from './indexWriter.js';
import type { WriterStatus } from './indexWriterThread.js';

export type { StoreLocation };

/** The index writer thread (SQLite) or the node's group commits (PostgreSQL). */
export interface AcceptanceCommits {
  /**
   * Whether the pipeline reads the suppressions and pre-checks the caps before composing: true on
   * SQLite (local reads); false on PostgreSQL, whose group reads them in the unit's one read.
   */
  readonly precheck: boolean;
  submitMany(
    units: { file: PendingSpoolFile | null; record: AcceptanceRecord }[],
  ): Promise<AcceptanceOutcome>[];
  updateLimits(limits: LimitSettings): void;
  /** null: the writer did not answer within `timeoutMs` (stalled). */
  status(timeoutMs: number): Promise<WriterStatus | null>;
  /** None on PostgreSQL: the event loop's registry has them. */
  metrics(): Promise<MetricsSnapshot>;
  close(): Promise<void>;
}

export interface ThreadStore {
  store: Queries;
  close(): Promise<void>;
}

/** The node's store, opened once at start. */
export interface NodeStore {
  backend: 'sqlite' | 'postgres';
  /** On PostgreSQL its writes too. */
  store: Queries;
  deliveryStore: Queries;
  acceptance: AcceptanceCommits;
  openBookkeeping(): Bookkeeping;
  /** On PostgreSQL a thread writes itself. */
  openBookkeepingPort(): MessagePort | null;
  location: StoreLocation;
  sqlite: Db | null;
  close(): Promise<void>;
}

export function storeLocationOf(config: Pick<PosternConfig, 'state_dir' | 'store'>): StoreLocation {
  if (config.store.backend === 'sqlite') return { backend: 'sqlite', stateDir: config.state_dir };
  // checked when the config was loaded
  return {
    backend: 'postgres',
    url: config.store.postgres.url!,
    poolSize: config.store.postgres.pool_size,
  };
}

export interface NodeStoreOptions {
  limits: LimitSettings;
  spoolSync: SpoolSync;
  metrics: boolean;
  nodeId: string;
  /** SQLite: run before the index writer thread starts (nothing else writes yet). */
  beforeWrites?: (store: Queries) => Promise<void>;
}

export async function openNodeStore(
  config: Pick<PosternConfig, 'state_dir' | 'store'>,
  logger: Logger,
  opts: NodeStoreOptions,
): Promise<NodeStore> {
  const location = storeLocationOf(config);
  if (location.backend === 'sqlite') {
    const db = openDatabase(location.stateDir, logger);
    await opts.beforeWrites?.(sqliteQueries(db));
    const indexWriter = new IndexWriter(
      location.stateDir,
      opts.limits,
      logger,
      opts.spoolSync,
      opts.metrics,
    );
    // The scheduler's writes go to the index writer thread: the event loop never waits for the write lock.
    const deliveryDb = openDatabase(location.stateDir, logger, {
      migrate: false,
      durability: 'at-least-once',
    });
    return {
      backend: 'sqlite',
      store: sqliteQueries(db),
      deliveryStore: sqliteQueries(deliveryDb),
      acceptance: indexWriter,
      openBookkeeping: () => new BookkeepingClient(indexWriter.openBookkeepingPort()),
      openBookkeepingPort: () => indexWriter.openBookkeepingPort(),
      location,
      sqlite: db,
      async close() {
        await indexWriter.close();
        deliveryDb.close();
        db.close();
      },
    };
  }
  const shared = await openSharedDatabase(location, logger, opts.nodeId);
  const store = shared.queries;
  const writer = new AcceptanceGroupWriter(shared.acceptanceGroups, opts.limits, logger);
  return {
    backend: 'postgres',
    store,
    deliveryStore: store,
    acceptance: {
      precheck: false,
      submitMany: (units) => writer.submitMany(units),
      updateLimits: (limits) => writer.updateLimits(limits),
      status: async (timeoutMs) => ({ lastWriteError: await writer.lastWriteError(timeoutMs) }),
      metrics: async () => [],
      close: () => writer.close(),
    },
    openBookkeeping: () => new DirectBookkeeping(store),
    openBookkeepingPort: () => null,
    location,
    sqlite: null,
    async close() {
      await writer.close();
      await shared.close();
    },
  };
}

/** A worker thread's or an operator command's (`migrate` may come before the first start, so it migrates). */
export async function openThreadStore(
  location: StoreLocation,
  logger: Logger,
  name: string,
  opts: { migrate?: boolean } = {},
): Promise<ThreadStore> {
  const connections = await openConnections(location, logger, name, opts);
  return { store: connections.queries, close: () => connections.close() };
}

export function bookkeepingThrough(port: MessagePort | null, store: Queries): Bookkeeping {
  return port ? new BookkeepingClient(port) : new DirectBookkeeping(store);
}
