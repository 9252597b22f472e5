import { createReadStream } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { readBodyChunks } from './postgres/bodyChunks.js';
import { getValue, type Queries } from './queries.js';

/** The spool_path of a small message whose MIME is kept in the index (message_bodies) with its row. */
export const BODY_IN_INDEX = '';

export async function insertMessageBody(
  q: Queries,
  messageId: string,
  mime: Uint8Array,
): Promise<void> {
  // A Buffer over the same memory (no copy): what both drivers bind as a blob.
  await q.run(
    'INSERT INTO message_bodies (message_id, mime) VALUES (?, ?)',
    messageId,
    Buffer.isBuffer(mime) ? mime : Buffer.from(mime.buffer, mime.byteOffset, mime.byteLength),
  );
}

export type StoredMime = { held: Buffer } | { file: string } | { open: () => Readable };

/** A missing body row for `BODY_IN_INDEX` is a broken index, reported as such. */
export async function storedMime(
  q: Queries,
  spoolRoot: string,
  row: { id: string; spool_path: string },
): Promise<StoredMime> {
  // On PostgreSQL every body is in message_body_chunks, whatever spool_path says.
  if (q.dialect === 'postgres') return { open: () => readBodyChunks(q, row.id) };
  if (row.spool_path !== BODY_IN_INDEX) return { file: path.join(spoolRoot, row.spool_path) };
  const mime = await getValue<Buffer>(
    q,
    'SELECT mime FROM message_bodies WHERE message_id = ?',
    row.id,
  );
  if (!mime) throw new Error(`message ${row.id}: its body is missing from the index`);
  return { held: mime };
}

export function openStoredMime(mime: StoredMime): Readable {
  return 'held' in mime
    ? Readable.from([mime.held], { objectMode: false })
    : 'file' in mime
      ? createReadStream(mime.file)
      : mime.open();
}
