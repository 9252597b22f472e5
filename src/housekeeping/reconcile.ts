import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import { sql, type Db } from '../store/db.js';
import { LIVE_STATUSES, messageExists } from '../store/messages.js';
import type { Spool } from '../spool/spool.js';

export interface ReconcileReport {
  tempFilesRemoved: number;
  orphanFilesRemoved: number;
  rowsWithoutFile: number;
  /** Retired files (empty) kept for reuse from the previous run. */
  freeFilesKept: number;
}


/**
 * Run at start, before any listener opens. A crash can leave a temp file (never acknowledged)
 * or a renamed file whose index row never committed (never acknowledged): both are removed.
 * A row whose file is gone cannot be delivered; it is failed loudly rather than retried forever.
 */
export function reconcileSpool(db: Db, spool: Spool, logger: Logger, now: number): ReconcileReport {
  const temps = spool.removeTempFiles();
  for (const name of temps) logger.warn({ file: name }, 'removed half-written spool file');
  const freeFilesKept = spool.adoptFreeFiles();

  let orphanFilesRemoved = 0;
  for (const rel of spool.listFiles()) {
    const id = path.basename(rel, '.eml');
    if (!messageExists(db, id)) {
      spool.removeSync(rel);
      orphanFilesRemoved++;
      logger.warn({ file: rel }, 'removed spool file without an index row (unacknowledged write)');
    }
  }

  // The live rows are walked, not loaded: a queue of 100,000 is 100,000 rows. Only the rows
  // whose file is gone (none, normally) are held until the walk ends and they can be updated.
  const missing: { id: string; spool_path: string }[] = [];
  const live = sql(db, `SELECT id, spool_path FROM messages WHERE status IN (${LIVE_STATUSES.map(() => '?').join(', ')})`).iterate(...LIVE_STATUSES) as IterableIterator<{
    id: string;
    spool_path: string;
  }>;
  for (const row of live) if (!existsSync(spool.absolute(row.spool_path))) missing.push(row);
  const fail = sql(db, "UPDATE messages SET status = 'failed', last_error = 'spool_file_missing', updated_at = ? WHERE id = ?");
  for (const row of missing) {
    fail.run(now, row.id);
    logger.error({ message_id: row.id, file: row.spool_path }, 'index row without its spool file; message failed');
  }
  const rowsWithoutFile = missing.length;
  const report = { tempFilesRemoved: temps.length, orphanFilesRemoved, rowsWithoutFile, freeFilesKept };
  logger.info(report, 'spool reconciled');
  return report;
}
