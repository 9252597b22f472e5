import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import { sql, type Db } from '../store/db.js';
import { messageExists } from '../store/messages.js';
import type { Spool } from './spool.js';

export interface ReconcileReport {
  tempFilesRemoved: number;
  orphanFilesRemoved: number;
  rowsWithoutFile: number;
}

/** States in which a message still needs its MIME file. */
const LIVE_STATES = ['queued', 'scheduled', 'paused', 'captured', 'sending'];

/**
 * Run at start, before any listener opens. A crash can leave a temp file (never acknowledged)
 * or a renamed file whose index row never committed (never acknowledged): both are removed.
 * A row whose file is gone cannot be delivered; it is failed loudly rather than retried forever.
 */
export function reconcileSpool(db: Db, spool: Spool, logger: Logger, now: number): ReconcileReport {
  const temps = spool.removeTempFiles();
  for (const name of temps) logger.warn({ file: name }, 'removed half-written spool file');

  let orphanFilesRemoved = 0;
  for (const rel of spool.listFiles()) {
    const id = path.basename(rel, '.eml');
    if (!messageExists(db, id)) {
      spool.removeSync(rel);
      orphanFilesRemoved++;
      logger.warn({ file: rel }, 'removed spool file without an index row (unacknowledged write)');
    }
  }

  let rowsWithoutFile = 0;
  const rows = sql(db, `SELECT id, spool_path FROM messages WHERE status IN (${LIVE_STATES.map(() => '?').join(', ')})`).all(
    ...LIVE_STATES,
  ) as { id: string; spool_path: string }[];
  const fail = sql(db, "UPDATE messages SET status = 'failed', last_error = 'spool_file_missing', updated_at = ? WHERE id = ?");
  for (const row of rows) {
    if (!existsSync(spool.absolute(row.spool_path))) {
      fail.run(now, row.id);
      rowsWithoutFile++;
      logger.error({ message_id: row.id, file: row.spool_path }, 'index row without its spool file; message failed');
    }
  }
  const report = { tempFilesRemoved: temps.length, orphanFilesRemoved, rowsWithoutFile };
  logger.info(report, 'spool reconciled');
  return report;
}
