/** The store's seams: what differs between the backends, one object each (docs/architecture.md#the-stores-seams). */
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { MessageRow } from './messages.js';
import type { Queries } from './queries.js';
import type { WebhookBookkeeping, WebhookBookkeepingResult } from './webhookCycle.js';
import type { WebhookEndpointRow } from './webhookEndpoints.js';

export interface StoreCapabilities {
  /** Nodes read each other's rows in `nodes` (for the scheduler's share of the queue). */
  readonly sharedNodeList: boolean;
  /** Else the scheduler's memory is the record. */
  readonly sharedThrottles: boolean;
  /** Else each process counts in memory. */
  readonly sharedRateWindows: boolean;
  /** Else in the state directory. */
  readonly sharedCertificates: boolean;
}

export interface DeliveryLeaseStore {
  recordThrottle(q: Queries, accountId: string, until: number): Promise<void>;
  restingAccounts(q: Queries, now: number): Promise<[accountId: string, until: number][]>;
  /** Takes back `node`'s own leases it holds no hand-off for (none on one node, whose lease commits never go unanswered). */
  reclaim(
    q: Queries,
    request: { node: string; now: number; leaseUntil: number; holding: string[] },
  ): Promise<MessageRow[]>;
}

export interface WebhookOutbox {
  /** The caller wraps it in a transaction. */
  runCycle(q: Queries, work: WebhookBookkeeping): Promise<WebhookBookkeepingResult>;
  /** False where a cursor over events.seq does the fan-out. */
  hasQueuedEvents(q: Queries): Promise<boolean>;
  addEndpoint(
    q: Queries,
    row: Pick<
      WebhookEndpointRow,
      'id' | 'project_id' | 'url' | 'event_types' | 'secret' | 'created_at'
    >,
  ): Promise<WebhookEndpointRow>;
  /** Its pending deliveries end `failed` (`endpoint removed`). */
  removeEndpoint(
    q: Queries,
    id: string,
    now: number,
  ): Promise<{ removed: boolean; cancelled: number }>;
}

export interface BodyStore {
  /** Counted, or the database's own figures where a count would cost too much. */
  storedFigures(q: Queries): Promise<{ files: number; bytes: number }>;
}

export interface ViewerKeyStore {
  /** Created by whichever caller comes first. */
  secret(q: Queries, stateDir: string, logger: Logger, clock: Clock): Promise<Buffer>;
}

export interface CommitDurability {
  /** This commit returns before its flush: losing it in a crash only repeats work. */
  withoutFlush(tx: Queries): Promise<void>;
}

/** Another node may be doing it. */
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
