import { backendOf } from '../store/backendOf.js';
import { pruneReceipts } from '../store/feedback.js';
import { pruneIdempotencyKeys } from '../store/idempotency.js';
import { pruneFinishedMessageRows } from '../store/messageRetention.js';
import { pruneStoppedNodes } from '../store/nodes.js';
import { pruneOperatorSessions } from '../store/operatorSessions.js';
import type { Queries } from '../store/queries.js';

/** So its cookie is still answered session_expired (a reload, the next morning). */
const EXPIRED_SESSION_KEPT_MS = 24 * 3600_000;

const DAY_MS = 86_400_000;
/** A renamed or retired node drops out of the list. */
export const STOPPED_NODE_DAYS = 7;

/** Always for one node; with several, unless another is doing it now (the next round comes an hour later). */
function housekeepingTurn(q: Queries): Promise<boolean> {
  return backendOf(q).housekeeping.take(q);
}

export interface PruneBookkeeping {
  now: number;
  retentionDays: number;
  sessionIdleSeconds: number;
}

export interface PruneBookkeepingResult {
  /** PostgreSQL: another node held the housekeeping lock. */
  skipped: boolean;
  idempotencyKeys: number;
  receipts: number;
  sessions: number;
  nodes: number;
}

export interface RetentionBookkeeping {
  now: number;
  defaultRetentionDays: number;
  limit: number;
}

export interface RetentionBookkeepingResult {
  /** PostgreSQL: another node held the housekeeping lock. */
  skipped: boolean;
  /** A full chunk: there may be more. */
  removed: number;
  /** To be retired once this has committed. */
  spoolFiles: string[];
}

export async function applyPruneBookkeeping(
  q: Queries,
  work: PruneBookkeeping,
): Promise<PruneBookkeepingResult> {
  if (!(await housekeepingTurn(q)))
    return { skipped: true, idempotencyKeys: 0, receipts: 0, sessions: 0, nodes: 0 };
  return {
    skipped: false,
    idempotencyKeys: await pruneIdempotencyKeys(q, work.now, work.retentionDays),
    // Providers resend feedback for days at most; receipts (and one-time tokens) outlive that.
    receipts: await pruneReceipts(q, work.now - work.retentionDays * DAY_MS),
    sessions: await pruneOperatorSessions(
      q,
      work.now - work.sessionIdleSeconds * 1000 - EXPIRED_SESSION_KEPT_MS,
    ),
    nodes: await pruneStoppedNodes(q, work.now - STOPPED_NODE_DAYS * DAY_MS),
  };
}

export async function applyRetentionBookkeeping(
  q: Queries,
  work: RetentionBookkeeping,
): Promise<RetentionBookkeepingResult> {
  if (!(await housekeepingTurn(q))) return { skipped: true, removed: 0, spoolFiles: [] };
  return {
    skipped: false,
    ...(await pruneFinishedMessageRows(q, work.now, work.defaultRetentionDays, work.limit)),
  };
}
