import type { Readable } from 'node:stream';
import type { EventRow } from './events.js';
import type { NewMessageRow } from './messages.js';
import type { UsageState } from './usage.js';

/**
 * Acceptances committed in groups, each group one transaction holding its projects' locks, by
 * several nodes at once on one database (store/postgres/acceptanceGroups.ts). The store runs the
 * transaction, the locks and a savepoint per unit; the commit layer judges each unit
 * (commit/acceptanceGroup.ts), through AcceptanceUnitWrites, between the reads and the writes.
 */

/** What to read for one acceptance; null: not needed (the answer is then neutral). */
export interface AcceptanceReadRequest {
  projectId: string;
  environment: string;
  idempotencyKey: string | null;
  senderDomain: string | null;
  category: string | null;
  monthPeriod: string | null;
  dayPeriod: string | null;
}

/** The caps' and quotas' facts, and the first acceptance's response under this Idempotency-Key (null: none). */
export type AcceptanceRead = UsageState & { idempotentResponse: string | null };

/** What a unit's judge writes, in the group's transaction, under its project's lock. */
export interface AcceptanceUnitWrites {
  /** Everything the unit is judged by, in one read taken after the project's lock. */
  readState(request: AcceptanceReadRequest): Promise<AcceptanceRead>;
  registerSenderDomain(projectId: string, domain: string, now: number): Promise<void>;
  registerCategory(projectId: string, name: string, now: number): Promise<void>;
  /** One message and `bytes` more in each of `periods` (distinct). */
  addUsage(projectId: string, periods: readonly string[], bytes: number): Promise<void>;
  insertMessage(row: NewMessageRow): Promise<void>;
  /** The MIME, read as it is written, never whole. */
  writeBody(messageId: string, body: Readable): Promise<void>;
  insertIdempotencyKey(row: { project_id: string; environment: string; key: string; message_id: string; response: string; created_at: number }): Promise<void>;
  insertEvent(row: Omit<EventRow, 'seq'>): Promise<void>;
}

/** Per unit, in the order given: its outcome, or why it failed (it was rolled back alone, or the whole group was: `commit failed: …`). */
export type GroupUnitResult<Outcome> = { ok: true; outcome: Outcome } | { ok: false; error: string };

export interface AcceptanceGroupStore {
  /** The stored body's piece size: a body read in pieces of this size is written without copies. */
  readonly bodyPieceBytes: number;
  /**
   * Commits `units` in one durable transaction: each unit under its project's lock (`projectOf`),
   * judged and written by `commitUnit` (given the project's plan) in a savepoint of its own.
   */
  commitGroup<Unit, Outcome>(
    units: readonly Unit[],
    projectOf: (unit: Unit) => string,
    commitUnit: (writes: AcceptanceUnitWrites, unit: Unit, planName: string) => Promise<Outcome>,
  ): Promise<GroupUnitResult<Outcome>[]>;
  /** Why commits fail now (unreachable, read-only), asked of the database; null: it answers as a primary. */
  commitRefusal(): Promise<string | null>;
}
