import { pruneReceipts } from '../store/feedback.js';
import { pruneIdempotencyKeys } from '../store/idempotency.js';
import { pruneFinishedMessageRows } from '../store/messageRetention.js';
import { pruneOperatorSessions } from '../store/operatorSessions.js';
import { pruneStoppedNodes } from '../store/nodes.js';
import { backendOf } from '../store/backendOf.js';
import type { Queries } from '../store/queries.js';

/** An expired session is kept this long, so its cookie is still answered session_expired (a reload, the next morning). */
const EXPIRED_SESSION_KEPT_MS = 24 * 3600_000;

const DAY_MS = 86_400_000;
/** A node stopped this long ago is no longer listed (a renamed or retired one drops out). */
export const STOPPED_NODE_DAYS = 7;

/**
 * Whether this transaction may do housekeeping: always for one node; where several share the
 * store, if no other node is doing it now (it skips the round; the next comes an hour later).
 */
function housekeepingTurn(q: Queries): Promise<boolean> {
  return backendOf(q).housekeeping.take(q);
}

/**
 * The hourly prune of what only bounds repeats: Idempotency-Keys past retention, old feedback
 * receipts; console sessions idle past their expiry; nodes stopped for STOPPED_NODE_DAYS.
 */
export interface PruneBookkeeping {
  now: number;
  retentionDays: number;
  /** `console.session_idle_seconds`: a session not used for this long is over. */
  sessionIdleSeconds: number;
}

export interface PruneBookkeepingResult {
  /** PostgreSQL: another node held the housekeeping lock, so nothing was done this round. */
  skipped: boolean;
  idempotencyKeys: number;
  receipts: number;
  sessions: number;
  nodes: number;
}

/** One chunk of the retention sweep: up to `limit` finished messages past their project's retention. */
export interface RetentionBookkeeping {
  now: number;
  defaultRetentionDays: number;
  limit: number;
}

export interface RetentionBookkeepingResult {
  /** PostgreSQL: another node held the housekeeping lock, so nothing was done this round. */
  skipped: boolean;
  /** Messages removed (a full chunk: there may be more). */
  removed: number;
  /** The removed messages' spool files, to be retired once this has committed. */
  spoolFiles: string[];
}

/** Runs the prune; the caller wraps it in a transaction. */
export async function applyPruneBookkeeping(q: Queries, work: PruneBookkeeping): Promise<PruneBookkeepingResult> {
  if (!(await housekeepingTurn(q))) return { skipped: true, idempotencyKeys: 0, receipts: 0, sessions: 0, nodes: 0 };
  return {
    skipped: false,
    idempotencyKeys: await pruneIdempotencyKeys(q, work.now, work.retentionDays),
    // Providers resend feedback for days at most; receipts (and one-time tokens) outlive that.
    receipts: await pruneReceipts(q, work.now - work.retentionDays * DAY_MS),
    sessions: await pruneOperatorSessions(q, work.now - work.sessionIdleSeconds * 1000 - EXPIRED_SESSION_KEPT_MS),
    nodes: await pruneStoppedNodes(q, work.now - STOPPED_NODE_DAYS * DAY_MS),
  };
}

/** Runs one retention chunk; the caller wraps it in a transaction. */
export async function applyRetentionBookkeeping(q: Queries, work: RetentionBookkeeping): Promise<RetentionBookkeepingResult> {
  if (!(await housekeepingTurn(q))) return { skipped: true, removed: 0, spoolFiles: [] };
  return { skipped: false, ...(await pruneFinishedMessageRows(q, work.now, work.defaultRetentionDays, work.limit)) };
}
