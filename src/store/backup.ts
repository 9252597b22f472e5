import Database from 'better-sqlite3';
import type { Db } from './db.js';

export const INDEX_FILE = 'postern.db';

/** sqlite3_backup_step copies none for 0. */
const ALL_PAGES = 0x7fffffff;

/**
 * SQLite's online backup in one step, one read snapshot: with a step size every commit between steps
 * restarts it, and under steady sends it never ends.
 */
export async function backupIndex(db: Db, destFile: string): Promise<{ totalPages: number }> {
  const done = await db.backup(destFile, { progress: () => ALL_PAGES });
  return { totalPages: done.totalPages };
}

export function spoolFilesOfCopy(
  indexFile: string,
): { id: string; spool_path: string; size_bytes: number }[] {
  const copy = new Database(indexFile, { readonly: true, fileMustExist: true });
  try {
    return copy.prepare('SELECT id, spool_path, size_bytes FROM messages ORDER BY rowid').all() as {
      id: string;
      spool_path: string;
      size_bytes: number;
    }[];
  } finally {
    copy.close();
  }
}

export function quickCheck(db: Db): string {
  return (db.pragma('quick_check', { simple: true }) as string) ?? 'no answer';
}
