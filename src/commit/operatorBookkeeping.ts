import { recordApiKeyUse } from '../store/apiKeyUsage.js';
import { insertAudit, type AuditRow } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { applyMessageAction, type MessageAction } from '../store/messageActions.js';

/**
 * Writes of the operator layer that the server hands to the index writer thread as plain data
 * (commit/bookkeepingChannel.ts), so the event loop that serves the doors never waits for the
 * write lock: a chunk of a bulk message action, and the API keys' last use.
 */
export type OperatorBookkeeping =
  | {
      type: 'message_action';
      action: MessageAction;
      /** The chunk's messages, a JSON list of `[rowid, id]` (as the bulk action read them). */
      rows: string;
      /** Send back the ids changed (a list of ids); else only their count (a filter's). */
      returnIds: boolean;
      now: number;
      /** The last chunk: flushed to disk before its commit returns, and carrying the action's audit row. */
      durable: boolean;
      /** The audit row of the whole action, written with its last chunk when anything changed; `details.changed` is filled in. */
      audit?: { row: Omit<AuditRow, 'seq' | 'details'>; details: Record<string, unknown>; changedBefore: number };
    }
  | { type: 'key_use'; uses: [string, number][] };

export interface OperatorBookkeepingResult {
  /** The messages a message action changed (when asked for). */
  changed: string[];
  changedCount: number;
}

/** Runs one write; the caller wraps it in a transaction. */
export function applyOperatorBookkeeping(db: Db, work: OperatorBookkeeping): OperatorBookkeepingResult {
  if (work.type === 'key_use') {
    recordApiKeyUse(db, new Map(work.uses));
    return { changed: [], changedCount: 0 };
  }
  const changed = applyMessageAction(db, work.action, { rows: work.rows }, work.now);
  const total = (work.audit?.changedBefore ?? 0) + changed.length;
  if (work.audit && total > 0) insertAudit(db, { ...work.audit.row, details: JSON.stringify({ ...work.audit.details, changed: total }) });
  return { changed: work.returnIds ? changed : [], changedCount: changed.length };
}

/** Whether a write must reach the disk before its commit returns (the last chunk of an operator's action). */
export const operatorWriteIsDurable = (work: OperatorBookkeeping): boolean => work.type === 'message_action' && work.durable;
