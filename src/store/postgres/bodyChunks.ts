import { Readable } from 'node:stream';
import type { Pool, PoolClient } from 'pg';
import { getValue, type Queries } from '../queries.js';
import { postgresQueries } from './queries.js';

/** The largest piece of a body one row holds (message_body_chunks, migration 8). */
export const BODY_CHUNK_BYTES = 256 * 1024;

export interface WrittenBody {
  bytes: number;
  chunks: number;
}

/**
 * Writes a message's MIME from `body` into message_body_chunks as it arrives, in pieces of
 * `chunkBytes` (the last one shorter; an empty body is one empty piece, so every stored body
 * has piece 0). Runs on `client` inside the caller's transaction, which commits the pieces
 * with the message's row or rolls them back with it. At most one piece and one incoming
 * buffer are held at a time: the next one is read after the previous insert returned.
 */
export async function writeBodyChunks(
  client: PoolClient,
  messageId: string,
  body: Readable,
  chunkBytes = BODY_CHUNK_BYTES,
): Promise<WrittenBody> {
  if (!Number.isInteger(chunkBytes) || chunkBytes <= 0)
    throw new RangeError(`chunkBytes must be a positive integer, not ${chunkBytes}`);
  let seq = 0;
  let bytes = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const insert = async (piece: Buffer) => {
    await client.query(
      'INSERT INTO message_body_chunks (message_id, seq, bytes) VALUES ($1, $2, $3)',
      [messageId, seq, piece],
    );
    seq += 1;
    bytes += piece.length;
  };
  for await (const data of body) {
    let incoming =
      typeof data === 'string'
        ? Buffer.from(data)
        : Buffer.isBuffer(data)
          ? data
          : Buffer.from(data as Uint8Array);
    while (pendingBytes + incoming.length >= chunkBytes) {
      const take = chunkBytes - pendingBytes;
      pending.push(incoming.subarray(0, take));
      incoming = incoming.subarray(take);
      await insert(pending.length === 1 ? pending[0] : Buffer.concat(pending, chunkBytes));
      pending = [];
      pendingBytes = 0;
    }
    if (incoming.length > 0) {
      pending.push(incoming);
      pendingBytes += incoming.length;
    }
  }
  if (pendingBytes > 0 || seq === 0) await insert(Buffer.concat(pending, pendingBytes));
  return { bytes, chunks: seq };
}

/**
 * A stored body as a stream, fetched one piece per query as the consumer reads (each query on
 * whichever pooled connection is free, none held while the consumer is slow), so a 40 MB
 * message is never whole in memory. The body must exist: none at all, or a piece missing
 * (deleted while it was read), fails the stream.
 */
export function readBodyChunks(source: Pool | Queries, messageId: string): Readable {
  // The store reads through Queries (storedMime); a pool serves the tests and tools that hold one.
  const q = 'dialect' in source ? source : postgresQueries(source);
  let chunks: number | null = null;
  let seq = 0;
  async function nextPiece(): Promise<Buffer | null> {
    if (chunks === null) {
      chunks =
        (await getValue<number>(
          q,
          'SELECT count(*)::int AS chunks FROM message_body_chunks WHERE message_id = ?',
          messageId,
        )) ?? 0;
      if (chunks === 0)
        throw new Error(`message ${messageId}: its body is missing from the database`);
    }
    if (seq >= chunks) return null;
    // In text, as hex (pg decodes it to a Buffer): pg's binary results decode every field as
    // UTF-8 text, which bytea does not survive.
    const bytes = await getValue<Buffer>(
      q,
      'SELECT bytes FROM message_body_chunks WHERE message_id = ? AND seq = ?',
      messageId,
      seq,
    );
    if (!bytes)
      throw new Error(
        `message ${messageId}: piece ${seq} of its body is missing from the database`,
      );
    seq += 1;
    // The one empty piece is a whole empty body: pushing it would not end the stream, null does.
    return bytes.length === 0 ? null : bytes;
  }
  // A byte stream like a spool file's read stream. It asks for the next piece only when the
  // consumer has taken the last (highWaterMark 1: any piece fills the buffer).
  return new Readable({
    highWaterMark: 1,
    read() {
      nextPiece().then(
        (piece) => this.push(piece),
        (err: Error) => this.destroy(err),
      );
    },
  });
}
