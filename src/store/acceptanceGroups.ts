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
  /** The addresses to look up in the project's suppressions (lower case, distinct); null: none. */
  recipients: string[] | null;
}

/** Also the first response under this Idempotency-Key, and the recipients the project suppresses (in order). */
export type AcceptanceRead = UsageState & {
  idempotentResponse: string | null;
  suppressed: string[];
};

/** Everything an accepted unit stores but a body too big for one piece. */
export interface AcceptanceUnitRows {
  message: NewMessageRow;
  /** The MIME when held and no larger than one stored piece (bodyPieceBytes); else null (writeBody). */
  body: Buffer | null;
  idempotency: { key: string; response: string } | null;
  event: Omit<EventRow, 'seq'>;
  /** Registered if new; null: nothing to register. */
  senderDomain: string | null;
  category: string | null;
  /** Distinct periods whose counters move by one message and `bytes`. */
  periods: readonly string[];
  bytes: number;
}

export interface AcceptanceUnitWrites {
  /** One read taken after the project's lock. */
  readState(request: AcceptanceReadRequest): Promise<AcceptanceRead>;
  /** An accepted unit's rows, in one statement. */
  writeUnit(rows: AcceptanceUnitRows): Promise<void>;
  /** A body not written with its rows, read as it is written, never whole. */
  writeBody(messageId: string, body: Readable): Promise<void>;
}

/** Per unit, in order: its outcome, or why it failed (rolled back alone, or the whole group: `commit failed: …`). */
export type GroupUnitResult<Outcome> =
  | { ok: true; outcome: Outcome }
  | { ok: false; error: string };

export interface AcceptanceGroupStore {
  /** A body read in pieces of this size is written without copies. */
  readonly bodyPieceBytes: number;
  /** Each unit under its project's lock, judged and written; one that throws fails alone, the others commit without it. */
  commitGroup<Unit, Outcome>(
    units: readonly Unit[],
    projectOf: (unit: Unit) => string,
    commitUnit: (writes: AcceptanceUnitWrites, unit: Unit, planName: string) => Promise<Outcome>,
  ): Promise<GroupUnitResult<Outcome>[]>;
  /** null: it answers as a primary. */
  commitRefusal(): Promise<string | null>;
}
