/**
 * The store's seams: what differs between the two backends, as one object per backend
 * (store/sqlite/backend.ts, store/postgres/backend.ts), as KumoMTA picks its spool once.
 * A connection is opened for one backend (store/open.ts); backendOf(q) gives its object, so
 * the layers above call the seam and never ask which backend answers.
 */
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { MessageRow } from './messages.js';
import type { Queries } from './queries.js';
import type { WebhookBookkeeping, WebhookBookkeepingResult } from './webhookCycle.js';
import type { WebhookEndpointRow } from './webhooks.js';

/** What several nodes share through this store (one SQLite node shares nothing). */
export interface StoreCapabilities {
  /** Nodes read each other's rows in `nodes` (who else is up, for the scheduler's share of the queue). */
  readonly sharedNodeList: boolean;
  /** A provider's throttle rests the account on every node (recordThrottle); else the scheduler's memory is the record. */
  readonly sharedThrottles: boolean;
  /** Sliding windows are counted by every node together (store/rateWindows.ts); else each process counts in memory. */
  readonly sharedRateWindows: boolean;
  /** tls.acme's certificates, account key and challenges are kept in the store for every node; else in the state directory. */
  readonly sharedCertificates: boolean;
}

/** The delivery queue's leases and throttles, beyond what store/delivery.ts writes once for both. */
export interface DeliveryLeaseStore {
  /** Rests `accountId` until `until` for every node (nothing where throttles are not shared). */
  recordThrottle(q: Queries, accountId: string, until: number): Promise<void>;
  /** The accounts resting at `now`, each with its reset (none where throttles are not shared). */
  restingAccounts(q: Queries, now: number): Promise<[accountId: string, until: number][]>;
  /**
   * Takes back `node`'s own leases it holds no hand-off for (all but `holding`), renewed to
   * `leaseUntil` (none on one node, whose lease commits never go unanswered).
   */
  reclaim(q: Queries, request: { node: string; now: number; leaseUntil: number; holding: string[] }): Promise<MessageRow[]>;
}

/** The webhook outbox: fan-out, claims and outcomes (one dispatcher cycle), and the endpoint list they agree with. */
export interface WebhookOutbox {
  /** One dispatcher cycle's writes; the caller wraps it in a transaction. */
  runCycle(q: Queries, work: WebhookBookkeeping): Promise<WebhookBookkeepingResult>;
  /** Whether committed events wait in a queue for fan-out (false where a cursor over events.seq does the fan-out). */
  hasQueuedEvents(q: Queries): Promise<boolean>;
  addEndpoint(q: Queries, row: Pick<WebhookEndpointRow, 'id' | 'project_id' | 'url' | 'event_types' | 'secret' | 'created_at'>): Promise<WebhookEndpointRow>;
  /** Removes the endpoint; its pending deliveries end `failed` (`endpoint removed`). */
  removeEndpoint(q: Queries, id: string, now: number): Promise<{ removed: boolean; cancelled: number }>;
}

/** The stored MIME's figures (the overview's spool size). */
export interface BodyStore {
  /** The stored bodies' count and bytes: counted, or the database's own figures where a count would cost too much. */
  storedFigures(q: Queries): Promise<{ files: number; bytes: number }>;
}

/** Where the public viewer's signing key is kept: the state directory's file, or the row every node reads. */
export interface ViewerKeyStore {
  /** The key, created by whichever caller comes first (stamped by `clock`). */
  secret(q: Queries, stateDir: string, logger: Logger, clock: Clock): Promise<Buffer>;
}

/** How a transaction's commit reaches the disk, beyond the connection's default (every commit flushed). */
export interface CommitDurability {
  /** This transaction's commit returns before its flush: losing it in a crash only repeats work. */
  withoutFlush(tx: Queries): Promise<void>;
}

/** Whether this transaction may do housekeeping now (another node may be doing it). */
export interface HousekeepingTurns {
  take(q: Queries): Promise<boolean>;
}

export interface StoreBackend {
  readonly capabilities: StoreCapabilities;
  readonly deliveryLeases: DeliveryLeaseStore;
  readonly webhookOutbox: WebhookOutbox;
  readonly bodies: BodyStore;
  readonly viewerKey: ViewerKeyStore;
  readonly housekeeping: HousekeepingTurns;
  readonly commits: CommitDurability;
}
