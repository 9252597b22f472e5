import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import { failForMissingSpoolFile, liveMessageFiles, messageExists } from '../store/messages.js';
import type { Queries } from '../store/queries.js';
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
 * writes go straight to `q`, the start-up connection, while nothing else writes. A crash can
 * leave a temp file (never acknowledged) or a renamed file whose index row never committed
 * (never acknowledged): both are removed. A row whose file is gone cannot be delivered; it is
 * failed loudly rather than retried forever.
 */
export async function reconcileSpool(q: Queries, spool: Spool, logger: Logger, now: number): Promise<ReconcileReport> {
  const temps = spool.removeTempFiles();
  for (const name of temps) logger.warn({ file: name }, 'removed half-written spool file');
  const freeFilesKept = spool.adoptFreeFiles();

  let orphanFilesRemoved = 0;
  for (const rel of spool.listFiles()) {
    const id = path.basename(rel, '.eml');
    if (!(await messageExists(q, id))) {
      spool.removeSync(rel);
      orphanFilesRemoved++;
      logger.warn({ file: rel }, 'removed spool file without an index row (unacknowledged write)');
    }
  }

  // Only the rows whose file is gone (none, normally) are held until the walk ends and they
  // can be updated. The walk keeps the connection busy: its check of each file is synchronous.
  const missing: { id: string; spool_path: string }[] = [];
  for await (const row of liveMessageFiles(q)) if (!existsSync(spool.absolute(row.spool_path))) missing.push(row);
  for (const row of missing) {
    await failForMissingSpoolFile(q, row.id, now);
    logger.error({ message_id: row.id, file: row.spool_path }, 'index row without its spool file; message failed');
  }
  const rowsWithoutFile = missing.length;
  const report = { tempFilesRemoved: temps.length, orphanFilesRemoved, rowsWithoutFile, freeFilesKept };
  logger.info(report, 'spool reconciled');
  return report;
}
