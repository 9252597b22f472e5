import type { Queries } from './queries.js';

/** Port 0 in the config: the port it got. */
export interface NodeListener {
  name: string;
  protocol: string;
  host: string;
  port: number;
}

export interface NodeRow {
  id: string;
  version: string;
  pid: number;
  hostname: string;
  started_at: number;
  last_beat_at: number;
  /** Nodes of one cluster may differ, e.g. during a rolling change. */
  heartbeat_seconds: number;
  listeners: NodeListener[];
  stopped_at: number | null;
}

export const MISSED_BEATS = 3;

export type NodeState = 'up' | 'missing' | 'stopped';

/** Stopped, else up while it beat within MISSED_BEATS of its own heartbeats, else missing. */
export function nodeState(
  row: Pick<NodeRow, 'last_beat_at' | 'stopped_at' | 'heartbeat_seconds'>,
  now: number,
): NodeState {
  if (row.stopped_at !== null) return 'stopped';
  return now - row.last_beat_at <= MISSED_BEATS * row.heartbeat_seconds * 1000 ? 'up' : 'missing';
}

type StoredNodeRow = Omit<NodeRow, 'listeners'> & { listeners: string };

const fromStored = (row: StoredNodeRow): NodeRow => ({
  ...row,
  listeners: JSON.parse(row.listeners) as NodeListener[],
});

export async function findNode(q: Queries, id: string): Promise<NodeRow | undefined> {
  const row = await q.get<StoredNodeRow>('SELECT * FROM nodes WHERE id = ?', id);
  return row && fromStored(row);
}

export async function listNodes(q: Queries): Promise<NodeRow[]> {
  return (await q.all<StoredNodeRow>('SELECT * FROM nodes ORDER BY id')).map(fromStored);
}

/** A node id seen before (a restart) is written over. */
export async function upsertNode(q: Queries, row: Omit<NodeRow, 'stopped_at'>): Promise<void> {
  await q.run(
    `INSERT INTO nodes (id, version, pid, hostname, started_at, last_beat_at, heartbeat_seconds, listeners, stopped_at)
     VALUES (@id, @version, @pid, @hostname, @started_at, @last_beat_at, @heartbeat_seconds, @listeners, NULL)
     ON CONFLICT (id) DO UPDATE SET version = excluded.version, pid = excluded.pid, hostname = excluded.hostname,
       started_at = excluded.started_at, last_beat_at = excluded.last_beat_at, heartbeat_seconds = excluded.heartbeat_seconds,
       listeners = excluded.listeners, stopped_at = NULL`,
    { ...row, listeners: JSON.stringify(row.listeners) },
  );
}

/** A later process with the same id takes the row over; the earlier one's writes no longer move it. */
export type NodeRun = Pick<NodeRow, 'id' | 'pid' | 'started_at'>;

export async function recordNodeBeat(q: Queries, run: NodeRun, at: number): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE nodes SET last_beat_at = @at WHERE id = @id AND pid = @pid AND started_at = @started_at AND stopped_at IS NULL',
      { id: run.id, pid: run.pid, started_at: run.started_at, at },
    )) === 1
  );
}

export async function markNodeStopped(q: Queries, run: NodeRun, at: number): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE nodes SET stopped_at = @at, last_beat_at = @at WHERE id = @id AND pid = @pid AND started_at = @started_at AND stopped_at IS NULL',
      { id: run.id, pid: run.pid, started_at: run.started_at, at },
    )) === 1
  );
}

export async function pruneStoppedNodes(q: Queries, stoppedBefore: number): Promise<number> {
  return q.run('DELETE FROM nodes WHERE stopped_at IS NOT NULL AND stopped_at < ?', stoppedBefore);
}
