import type { Db } from './db.js';
import { recordApiKeyUse } from './apiKeyUsage.js';
import { applyMessageAction, type MessageAction } from './messageActions.js';

/**
 * Writes of the operator layer that the server hands to the index writer thread as plain data
 * (store/bookkeepingChannel.ts), so the event loop that serves the doors never waits for the
 * write lock: a chunk of a bulk message action, and the API keys' last use.
 */
export type OperatorWrite =
  | { type: 'message_action'; action: MessageAction; ids: string[]; now: number; durable: boolean }
  | { type: 'key_use'; uses: [string, number][] };

export interface OperatorWriteResult {
  /** The messages a message action changed. */
  changed: string[];
}

/** Runs one write; the caller wraps it in a transaction. */
export function applyOperatorWrite(db: Db, work: OperatorWrite): OperatorWriteResult {
  if (work.type === 'key_use') {
    recordApiKeyUse(db, new Map(work.uses));
    return { changed: [] };
  }
  return { changed: applyMessageAction(db, work.action, work.ids, work.now) };
}

/** Whether a write must reach the disk before its commit returns (the last chunk of an operator's action). */
export const isDurableWrite = (work: OperatorWrite): boolean => work.type === 'message_action' && work.durable;
