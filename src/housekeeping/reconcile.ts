import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import type { Spool } from '../spool/spool.js';
import { failForMissingSpoolFile, liveMessageFiles, messageExists } from '../store/messages.js';
import type { Queries } from '../store/queries.js';

export interface ReconcileReport {
  tempFilesRemoved: number;
  orphanFilesRemoved: number;
  rowsWithoutFile: number;
  freeFilesKept: number;
}

/** At start, before anything else writes. Unacknowledged leftovers are removed; a row whose file is gone is failed loudly. */
export async function reconcileSpool(
  q: Queries,
  spool: Spool,
  logger: Logger,
  now: number,
): Promise<ReconcileReport> {
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

  // Only the rows whose file is gone are held until the walk ends (its file checks keep the connection busy).
  const missing: { id: string; spool_path: string }[] = [];
  for await (const row of liveMessageFiles(q))
    if (!existsSync(spool.absolute(row.spool_path))) missing.push(row);
  for (const row of missing) {
    await failForMissingSpoolFile(q, row.id, now);
    logger.error(
      { message_id: row.id, file: row.spool_path },
      'index row without its spool file; message failed',
    );
  }
  const rowsWithoutFile = missing.length;
  const report = {
    tempFilesRemoved: temps.length,
    orphanFilesRemoved,
    rowsWithoutFile,
    freeFilesKept,
  };
  logger.info(report, 'spool reconciled');
  return report;
}
