import Database from 'better-sqlite3';
import type { Db } from './db.js';

/** The index's file name in a state directory, and in a backup. */
export const INDEX_FILE = 'postern.db';

/** Pages per backup step after the first: all of them (sqlite3_backup_step copies none for 0). */
const ALL_PAGES = 0x7fffffff;

/**
 * Copies the index into `destFile` with SQLite's online backup API, from a reader connection
 * while the server writes. better-sqlite3's first step copies no page (it counts them); the
 * second copies every page (ALL_PAGES): one step is one read snapshot, so commits of the server
 * meanwhile neither restart it nor appear half in it. (With a step size, each commit between
 * steps restarts the backup, and under steady sends it never ends.)
 */
export async function backupIndex(db: Db, destFile: string): Promise<{ totalPages: number }> {
  const done = await db.backup(destFile, { progress: () => ALL_PAGES });
  return { totalPages: done.totalPages };
}

/** Every message of an index copy with its spool file and size (read-only; the copy is closed after). */
export function spoolFilesOfCopy(indexFile: string): { id: string; spool_path: string; size_bytes: number }[] {
  const copy = new Database(indexFile, { readonly: true, fileMustExist: true });
  try {
    return copy.prepare('SELECT id, spool_path, size_bytes FROM messages ORDER BY rowid').all() as { id: string; spool_path: string; size_bytes: number }[];
  } finally {
    copy.close();
  }
}

/** The index's own check of a copy: "ok", or what it found wrong. */
export function quickCheck(db: Db): string {
  return (db.pragma('quick_check', { simple: true }) as string) ?? 'no answer';
}
