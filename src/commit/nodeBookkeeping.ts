import type { Db } from '../store/db.js';
import { findNode, markNodeStopped, recordNodeBeat, upsertNode, type NodeRow, type NodeRun } from '../store/nodes.js';

/**
 * A node's own row (store/nodes.ts): registered at start, a beat every heartbeat, stopped on a
 * graceful stop. Bookkeeping like the rest: committed with synchronous=NORMAL, since a lost
 * beat only makes the node look older for one heartbeat.
 */
export type NodeBookkeeping =
  | { type: 'register'; row: Omit<NodeRow, 'stopped_at'> }
  | { type: 'beat'; run: NodeRun; at: number }
  | { type: 'stop'; run: NodeRun; at: number };

export interface NodeBookkeepingResult {
  /** `register`: the row this one replaced (another run of the same id), if any. */
  previous: NodeRow | null;
  /** `beat`, `stop`: whether the row was still this run's. */
  changed: boolean;
}

/** Runs one node write; the caller wraps it in a transaction. */
export function applyNodeBookkeeping(db: Db, work: NodeBookkeeping): NodeBookkeepingResult {
  switch (work.type) {
    case 'register': {
      const previous = findNode(db, work.row.id) ?? null;
      upsertNode(db, work.row);
      return { previous, changed: true };
    }
    case 'beat':
      return { previous: null, changed: recordNodeBeat(db, work.run, work.at) };
    case 'stop':
      return { previous: null, changed: markNodeStopped(db, work.run, work.at) };
  }
}
