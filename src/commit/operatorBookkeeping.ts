import { recordApiKeyUse } from '../store/apiKeyUsage.js';
import { insertAudit, type AuditRow } from '../store/audit.js';
import { applyMessageAction, countChanged, type MessageAction, type MessagesChanged } from '../store/messageActions.js';
import type { Queries } from '../store/queries.js';
import { applyOperatorWrite, OPERATOR_WRITES_NOT_DURABLE, WriteRefused, type OperatorWrite, type OperatorWrites, type WriteRefusal } from './operatorWrites.js';

/**
 * Every write the operator layer makes, as plain data: in the server the index writer thread
 * runs it (commit/bookkeepingChannel.ts), so the event loop that serves the doors never writes
 * nor waits for the write lock; in the CLI its own connection does. One transaction each: a
 * chunk of a bulk message action, the API keys' last use, and each single operation with its
 * audit row (operatorWrites.ts).
 */
export type MessageActionChunk = {
  type: 'message_action';
  action: MessageAction;
  /** The chunk's messages, a JSON list of MessageKey (as the bulk action read them). */
  rows: string;
  /** Send back the ids changed (a list of ids); else only their count (a filter's). */
  returnIds: boolean;
  now: number;
  /** The last chunk: flushed to disk before its commit returns, and carrying the action's audit row. */
  durable: boolean;
  /** The audit row of the whole action, written with its last chunk when anything changed; `details.changed` is filled in. */
  audit?: { row: Omit<AuditRow, 'seq' | 'details'>; details: Record<string, unknown>; changedBefore: number };
};

export interface MessageActionResult {
  /** The messages a message action changed (when asked for). */
  changed: string[];
  changedCount: number;
  /** How many changed in each project and environment (whose live streams hear of it). */
  changedIn: MessagesChanged[];
}

type KeyUse = { type: 'key_use'; uses: [string, number][] };

export type OperatorBookkeeping = MessageActionChunk | KeyUse | OperatorWrite;

/** What a write answers: its result, by its type. */
export type OperatorResultOf<W extends OperatorBookkeeping> = W extends MessageActionChunk
  ? MessageActionResult
  : W extends KeyUse
    ? null
    : W extends { type: infer K extends keyof OperatorWrites }
      ? OperatorWrites[K][1]
      : never;

/** A write's outcome as it crosses the thread: its result, or why it changed nothing. */
export type OperatorBookkeepingResult = { value: unknown } | { refused: WriteRefusal };

/** Runs one write; the caller wraps it in a transaction. A refusal rolls back its own savepoint only. */
export async function applyOperatorBookkeeping(q: Queries, work: OperatorBookkeeping): Promise<OperatorBookkeepingResult> {
  if (work.type === 'key_use') {
    await recordApiKeyUse(q, new Map(work.uses));
    return { value: null };
  }
  if (work.type === 'message_action') return { value: await applyChunk(q, work) };
  try {
    return { value: await q.transaction((tx) => applyOperatorWrite(tx, work)) };
  } catch (err) {
    if (err instanceof WriteRefused) return { refused: err.refusal };
    throw err;
  }
}

async function applyChunk(q: Queries, work: MessageActionChunk): Promise<MessageActionResult> {
  const changed = await applyMessageAction(q, work.action, { rows: work.rows }, work.now);
  const total = (work.audit?.changedBefore ?? 0) + changed.length;
  if (work.audit && total > 0) await insertAudit(q, { ...work.audit.row, details: JSON.stringify({ ...work.audit.details, changed: total }) });
  return { changed: work.returnIds ? changed.map((m) => m.id) : [], changedCount: changed.length, changedIn: countChanged([], changed) };
}

/**
 * Whether a write must reach the disk before its commit returns: every one an operator is told
 * succeeded (the last chunk of a bulk action included); not the last-use and last-seen times.
 */
export function operatorWriteIsDurable(work: OperatorBookkeeping): boolean {
  if (work.type === 'message_action') return work.durable;
  if (work.type === 'key_use') return false;
  return !OPERATOR_WRITES_NOT_DURABLE.has(work.type);
}
