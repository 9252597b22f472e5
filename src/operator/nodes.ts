import { listNodes, type NodeListener, type NodeState, nodeState } from '../store/nodes.js';
import { iso, type OperatorContext } from './context.js';

export interface NodeView {
  id: string;
  version: string;
  state: NodeState;
  pid: number;
  hostname: string;
  started_at: string;
  last_beat_at: string;
  /** The node's own node.heartbeat_seconds: it is `missing` past 3 of them without a beat. */
  heartbeat_seconds: number;
  stopped_at: string | null;
  listeners: NodeListener[];
}

export interface NodeList {
  nodes: NodeView[];
}

/** `postern node list` and the console's Nodes panel: every node row, its state judged now. */
export async function nodeList(ctx: OperatorContext): Promise<NodeList> {
  const now = ctx.clock.now();
  return {
    nodes: (await listNodes(ctx.store)).map((row) => ({
      id: row.id,
      version: row.version,
      state: nodeState(row, now),
      pid: row.pid,
      hostname: row.hostname,
      started_at: iso(row.started_at)!,
      last_beat_at: iso(row.last_beat_at)!,
      heartbeat_seconds: row.heartbeat_seconds,
      stopped_at: iso(row.stopped_at),
      listeners: row.listeners,
    })),
  };
}

/** The list as a table for people: a row per node, listeners as name=host:port. */
export function nodeListTable(list: NodeList): string[] {
  if (list.nodes.length === 0) return ['no nodes have registered\n'];
  const head = ['id', 'state', 'version', 'pid', 'hostname', 'last beat', 'listeners'];
  const rows = list.nodes.map((n) => [
    n.id,
    n.state,
    n.version,
    String(n.pid),
    n.hostname,
    n.stopped_at ? `stopped ${n.stopped_at}` : n.last_beat_at,
    n.listeners.map((l) => `${l.name}=${l.host}:${l.port}`).join(' '),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    `${cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ')}\n`;
  return [line(head), ...rows.map(line)];
}
