import { readFileSync } from 'node:fs';
import path from 'node:path';
import { buffer } from 'node:stream/consumers';
import Database from 'better-sqlite3';
import { storedMime } from '../../src/store/messageBodies.js';
import { type Queries, sqliteQueries } from '../../src/store/queries.js';
import { testStore } from './postgres.js';
import { bodyFromChunks, withStateStore } from './storeReads.js';

/** A message's stored MIME, wherever it is kept: in the index (a small message), its spool file, or PostgreSQL's pieces. */
export async function storedMimeOf(q: Queries, stateDir: string, id: string): Promise<Buffer> {
  const row = await q.get<{ id: string; spool_path: string }>(
    'SELECT id, spool_path FROM messages WHERE id = ?',
    id,
  );
  if (!row) throw new Error(`no message ${id}`);
  // PostgreSQL keeps every body in message_body_chunks, whatever spool_path says.
  if (q.dialect === 'postgres') return bodyFromChunks(q, id);
  const stored = await storedMime(q, path.join(stateDir, 'spool'), row);
  return 'held' in stored
    ? stored.held
    : 'file' in stored
      ? readFileSync(stored.file)
      : buffer(stored.open());
}

/**
 * A message's stored MIME read from a (stopped or running) server's state dir, read-only; or why
 * it cannot be read (its file or its body row missing).
 */
export async function readStoredMime(
  stateDir: string,
  row: { id: string; spool_path: string },
): Promise<Buffer | string> {
  if (testStore() === 'postgres')
    return withStateStore(stateDir, (q) => bodyFromChunks(q, row.id)).catch(
      (err: Error) => err.message,
    );
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    const stored = await storedMime(sqliteQueries(db), path.join(stateDir, 'spool'), row);
    return 'held' in stored
      ? stored.held
      : 'file' in stored
        ? readFileSync(stored.file)
        : await buffer(stored.open());
  } catch (err) {
    return (err as Error).message;
  } finally {
    db.close();
  }
}
