import { createReadStream } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { sql, type Db } from './db.js';

/**
 * The spool_path of a message whose MIME is kept in the index (message_bodies) instead of a
 * spool file: a small message, committed with its row (spool.index_body_max_bytes).
 */
export const BODY_IN_INDEX = '';

export function insertMessageBody(db: Db, messageId: string, mime: Uint8Array): void {
  sql(db, 'INSERT INTO message_bodies (message_id, mime) VALUES (?, ?)').run(messageId, mime);
}

/** Where a stored message's MIME is: held in the index, or a spool file. */
export type StoredMime = { held: Buffer } | { file: string };

/**
 * The stored MIME of the message `row`. A row says `BODY_IN_INDEX` only once its body row
 * committed with it, so a missing body row is a broken index, reported as such.
 */
export function storedMime(db: Db, spoolRoot: string, row: { id: string; spool_path: string }): StoredMime {
  if (row.spool_path !== BODY_IN_INDEX) return { file: path.join(spoolRoot, row.spool_path) };
  const mime = sql(db, 'SELECT mime FROM message_bodies WHERE message_id = ?').pluck().get(row.id) as Buffer | undefined;
  if (!mime) throw new Error(`message ${row.id}: its body is missing from the index`);
  return { held: mime };
}

/** The stored MIME as a stream: a spool file is read as it is consumed, never whole. */
export function openStoredMime(mime: StoredMime): Readable {
  return 'held' in mime ? Readable.from([mime.held], { objectMode: false }) : createReadStream(mime.file);
}
