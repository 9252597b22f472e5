import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import type { Db } from '../store/db.js';
import { failForMissingSpoolFile, liveMessageFiles, messageExists } from '../store/messages.js';
import type { Spool } from '../spool/spool.js';

export interface ReconcileReport {
  tempFilesRemoved: number;
  orphanFilesRemoved: number;
  rowsWithoutFile: number;
  /** Retired files (empty) kept for reuse from the previous run. */
  freeFilesKept: number;
}


/**
 * Run at start, before any listener opens and before the index writer thread starts: its few
 * writes go straight to `db`, the start-up connection, while nothing else writes. A crash can
 * leave a temp file (never acknowledged) or a renamed file whose index row never committed
 * (never acknowledged): both are removed. A row whose file is gone cannot be delivered; it is
 * failed loudly rather than retried forever.
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

  // Only the rows whose file is gone (none, normally) are held until the walk ends and they
  // can be updated.
  const missing: { id: string; spool_path: string }[] = [];
  for (const row of liveMessageFiles(db)) if (!existsSync(spool.absolute(row.spool_path))) missing.push(row);
  for (const row of missing) {
    failForMissingSpoolFile(db, row.id, now);
    logger.error({ message_id: row.id, file: row.spool_path }, 'index row without its spool file; message failed');
  }
  const rowsWithoutFile = missing.length;
  const report = { tempFilesRemoved: temps.length, orphanFilesRemoved, rowsWithoutFile, freeFilesKept };
  logger.info(report, 'spool reconciled');
  return report;
}
