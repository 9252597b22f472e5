import type { Db } from '../store/db.js';
import { pruneReceipts } from '../store/feedback.js';
import { pruneIdempotencyKeys } from '../store/idempotency.js';
import { pruneFinishedMessages } from '../store/messageRetention.js';
import { pruneOperatorSessions } from '../store/operatorSessions.js';

const DAY_MS = 86_400_000;

/**
 * The hourly prune of what only bounds repeats: Idempotency-Keys past retention, old feedback
 * receipts; and console sessions idle past their expiry.
 */
export interface PruneBookkeeping {
  now: number;
  retentionDays: number;
  /** `console.session_idle_seconds`: a session not used for this long is over. */
  sessionIdleSeconds: number;
}

export interface PruneBookkeepingResult {
  idempotencyKeys: number;
  receipts: number;
  sessions: number;
}

/** One chunk of the retention sweep: up to `limit` finished messages past their project's retention. */
export interface RetentionBookkeeping {
  now: number;
  defaultRetentionDays: number;
  limit: number;
}

export interface RetentionBookkeepingResult {
  /** The removed messages' spool files, to be retired once this has committed. */
  spoolFiles: string[];
}

/** Runs the prune; the caller wraps it in a transaction. */
export function applyPruneBookkeeping(db: Db, work: PruneBookkeeping): PruneBookkeepingResult {
  return {
    idempotencyKeys: pruneIdempotencyKeys(db, work.now, work.retentionDays),
    // Providers resend feedback for days at most; receipts (and one-time tokens) outlive that.
    receipts: pruneReceipts(db, work.now - work.retentionDays * DAY_MS),
    sessions: pruneOperatorSessions(db, work.now - work.sessionIdleSeconds * 1000),
  };
}

/** Runs one retention chunk; the caller wraps it in a transaction. */
export function applyRetentionBookkeeping(db: Db, work: RetentionBookkeeping): RetentionBookkeepingResult {
  return { spoolFiles: pruneFinishedMessages(db, work.now, work.defaultRetentionDays, work.limit) };
}
