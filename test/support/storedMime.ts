import { readFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Db } from '../../src/store/db.js';
import { storedMime } from '../../src/store/messageBodies.js';

/** A message's stored MIME, wherever it is kept: in the index (a small message) or its spool file. */
export function storedMimeOf(db: Db, stateDir: string, id: string): Buffer {
  const row = db.prepare('SELECT id, spool_path FROM messages WHERE id = ?').get(id) as { id: string; spool_path: string } | undefined;
  if (!row) throw new Error(`no message ${id}`);
  const stored = storedMime(db, path.join(stateDir, 'spool'), row);
  return 'held' in stored ? stored.held : readFileSync(stored.file);
}

/**
 * A message's stored MIME read from a (stopped or running) server's state dir, read-only; or why
 * it cannot be read (its file or its body row missing).
 */
export function readStoredMime(stateDir: string, row: { id: string; spool_path: string }): Buffer | string {
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    const stored = storedMime(db, path.join(stateDir, 'spool'), row);
    return 'held' in stored ? stored.held : readFileSync(stored.file);
  } catch (err) {
    return (err as Error).message;
  } finally {
    db.close();
  }
}
