import {
  findNode,
  markNodeStopped,
  type NodeRow,
  type NodeRun,
  recordNodeBeat,
  upsertNode,
} from '../store/nodes.js';
import type { Queries } from '../store/queries.js';

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
export async function applyNodeBookkeeping(
  q: Queries,
  work: NodeBookkeeping,
): Promise<NodeBookkeepingResult> {
  switch (work.type) {
    case 'register': {
      const previous = (await findNode(q, work.row.id)) ?? null;
      await upsertNode(q, work.row);
      return { previous, changed: true };
    }
    case 'beat':
      return { previous: null, changed: await recordNodeBeat(q, work.run, work.at) };
    case 'stop':
      return { previous: null, changed: await markNodeStopped(q, work.run, work.at) };
  }
}
