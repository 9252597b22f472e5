import { createReadStream } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { getValue, type Queries } from './queries.js';

/**
 * The spool_path of a message whose MIME is kept in the index (message_bodies) instead of a
 * spool file: a small message, committed with its row (spool.index_body_max_bytes).
 */
export const BODY_IN_INDEX = '';

export async function insertMessageBody(q: Queries, messageId: string, mime: Uint8Array): Promise<void> {
  // A Buffer over the same memory (no copy): what both drivers bind as a blob.
  await q.run('INSERT INTO message_bodies (message_id, mime) VALUES (?, ?)', messageId, Buffer.isBuffer(mime) ? mime : Buffer.from(mime.buffer, mime.byteOffset, mime.byteLength));
}

/** Where a stored message's MIME is: held in the index, or a spool file. */
export type StoredMime = { held: Buffer } | { file: string };

/**
 * The stored MIME of the message `row`. A row says `BODY_IN_INDEX` only once its body row
 * committed with it, so a missing body row is a broken index, reported as such.
 */
export async function storedMime(q: Queries, spoolRoot: string, row: { id: string; spool_path: string }): Promise<StoredMime> {
  if (row.spool_path !== BODY_IN_INDEX) return { file: path.join(spoolRoot, row.spool_path) };
  const mime = await getValue<Buffer>(q, 'SELECT mime FROM message_bodies WHERE message_id = ?', row.id);
  if (!mime) throw new Error(`message ${row.id}: its body is missing from the index`);
  return { held: mime };
}

/** The stored MIME as a stream: a spool file is read as it is consumed, never whole. */
export function openStoredMime(mime: StoredMime): Readable {
  return 'held' in mime ? Readable.from([mime.held], { objectMode: false }) : createReadStream(mime.file);
}
