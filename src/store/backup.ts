import Database from 'better-sqlite3';
import type { Db } from './db.js';

/** The index's file name in a state directory, and in a backup. */
export const INDEX_FILE = 'postern.db';

/**
 * Copies the index into `destFile` with SQLite's online backup API, from a reader connection
 * while the server writes. After its first step the rest goes in one step (progress → 0): one
 * read snapshot, so commits of the server meanwhile neither restart it nor appear half in it.
 */
export async function backupIndex(db: Db, destFile: string): Promise<{ totalPages: number }> {
  const done = await db.backup(destFile, { progress: () => 0 });
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
