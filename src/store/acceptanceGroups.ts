import type { Readable } from 'node:stream';
import type { EventRow } from './events.js';
import type { NewMessageRow } from './messages.js';
import type { UsageState } from './usage.js';

/** Acceptances committed in groups, one transaction holding its projects' locks, by several nodes on one database. */

/** null: not needed (the answer is then neutral). */
export interface AcceptanceReadRequest {
  projectId: string;
  environment: string;
  idempotencyKey: string | null;
  senderDomain: string | null;
  category: string | null;
  monthPeriod: string | null;
  dayPeriod: string | null;
}

export type AcceptanceRead = UsageState & { idempotentResponse: string | null };

export interface AcceptanceUnitWrites {
  /** One read taken after the project's lock. */
  readState(request: AcceptanceReadRequest): Promise<AcceptanceRead>;
  registerSenderDomain(projectId: string, domain: string, now: number): Promise<void>;
  registerCategory(projectId: string, name: string, now: number): Promise<void>;
  addUsage(projectId: string, periods: readonly string[], bytes: number): Promise<void>;
  insertMessage(row: NewMessageRow): Promise<void>;
  /** Read as it is written, never whole. */
  writeBody(messageId: string, body: Readable): Promise<void>;
  insertIdempotencyKey(row: {
    project_id: string;
    environment: string;
    key: string;
    message_id: string;
    response: string;
    created_at: number;
  }): Promise<void>;
  insertEvent(row: Omit<EventRow, 'seq'>): Promise<void>;
}

/** Per unit, in order: its outcome, or why it failed (rolled back alone, or the whole group: `commit failed: …`). */
export type GroupUnitResult<Outcome> =
  | { ok: true; outcome: Outcome }
  | { ok: false; error: string };

export interface AcceptanceGroupStore {
  /** A body read in pieces of this size is written without copies. */
  readonly bodyPieceBytes: number;
  /** Each unit under its project's lock, judged and written in a savepoint of its own. */
  commitGroup<Unit, Outcome>(
    units: readonly Unit[],
    projectOf: (unit: Unit) => string,
    commitUnit: (writes: AcceptanceUnitWrites, unit: Unit, planName: string) => Promise<Outcome>,
  ): Promise<GroupUnitResult<Outcome>[]>;
  /** null: it answers as a primary. */
  commitRefusal(): Promise<string | null>;
}
