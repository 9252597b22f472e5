import { recordApiKeyUse } from '../store/apiKeyUsage.js';
import { type AuditRow, insertAudit } from '../store/audit.js';
import {
  applyMessageAction,
  countChanged,
  type MessageAction,
  type MessagesChanged,
} from '../store/messageActions.js';
import type { Queries } from '../store/queries.js';
import {
  applyOperatorWrite,
  OPERATOR_WRITES_NOT_DURABLE,
  type OperatorWrite,
  type OperatorWrites,
  type WriteRefusal,
  WriteRefused,
} from './operatorWrites.js';

/** Every write of the operator layer, as plain data, one transaction each: in the server the index writer thread runs it. */
export type MessageActionChunk = {
  type: 'message_action';
  action: MessageAction;
  /** A JSON list of MessageKey. */
  rows: string;
  /** Else only their count (a filter's). */
  returnIds: boolean;
  now: number;
  /** The last chunk: flushed before its commit returns, and carrying the action's audit row. */
  durable: boolean;
  audit?: {
    row: Omit<AuditRow, 'seq' | 'details'>;
    details: Record<string, unknown>;
    changedBefore: number;
  };
};

export interface MessageActionResult {
  changed: string[];
  changedCount: number;
  changedIn: MessagesChanged[];
}

type KeyUse = { type: 'key_use'; uses: [string, number][] };

export type OperatorBookkeeping = MessageActionChunk | KeyUse | OperatorWrite;

export type OperatorResultOf<W extends OperatorBookkeeping> = W extends MessageActionChunk
  ? MessageActionResult
  : W extends KeyUse
    ? null
    : W extends { type: infer K extends keyof OperatorWrites }
      ? OperatorWrites[K][1]
      : never;

export type OperatorBookkeepingResult = { value: unknown } | { refused: WriteRefusal };

/** A refusal rolls back its own savepoint only. */
export async function applyOperatorBookkeeping(
  q: Queries,
  work: OperatorBookkeeping,
): Promise<OperatorBookkeepingResult> {
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
  if (work.audit && total > 0)
    await insertAudit(q, {
      ...work.audit.row,
      details: JSON.stringify({ ...work.audit.details, changed: total }),
    });
  return {
    changed: work.returnIds ? changed.map((m) => m.id) : [],
    changedCount: changed.length,
    changedIn: countChanged([], changed),
  };
}

/** Every write an operator is told succeeded; not the last-use and last-seen times. */
export function operatorWriteIsDurable(work: OperatorBookkeeping): boolean {
  if (work.type === 'message_action') return work.durable;
  if (work.type === 'key_use') return false;
  return !OPERATOR_WRITES_NOT_DURABLE.has(work.type);
}
