import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type pg from 'pg';
import { silentLogger } from '../../src/log.js';
import {
  BODY_CHUNK_BYTES,
  readBodyChunks,
  writeBodyChunks,
} from '../../src/store/postgres/bodyChunks.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  startPrivatePostgres,
  type TestPostgres,
  testPool,
} from '../support/postgres.js';

/** 40 MB and a bit: the largest message a send may carry, and a short last piece. */
const BODY_BYTES = 40_000_000 + 123;

/** `size` random bytes in odd-sized pieces, made as they are read; `digest()` once it has ended. */
function randomBody(size: number): { stream: Readable; digest(): string } {
  const hash = createHash('sha256');
  async function* pieces(): AsyncGenerator<Buffer> {
    for (let sent = 0; sent < size; ) {
      const piece = randomBytes(Math.min(65_537, size - sent));
      hash.update(piece);
      sent += piece.length;
      yield piece;
    }
  }
  return {
    stream: Readable.from(pieces(), { objectMode: false }),
    digest: () => hash.digest('hex'),
  };
}

/** The SHA-256 and length of what a stream gives, and the highest RSS seen above `baseline` while reading it. */
async function consume(
  stream: Readable,
  baseline: number,
): Promise<{ digest: string; bytes: number; peakGrowth: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  let peak = baseline;
  for await (const piece of stream) {
    hash.update(piece as Buffer);
    bytes += (piece as Buffer).length;
    peak = Math.max(peak, process.memoryUsage.rss());
  }
  return { digest: hash.digest('hex'), bytes, peakGrowth: peak - baseline };
}

describe('message bodies in PostgreSQL, in chunks', { skip: postgresUnavailable() }, () => {
  let server: TestPostgres;
  let database: FreshDatabase;
  let pool: pg.Pool;
  before(async () => {
    server = await startPrivatePostgres();
    database = await freshDatabase(server.url);
    pool = testPool(database.url, 3);
    await migratePostgres(pool, silentLogger());
  });
  after(async () => {
    await pool?.end();
    await database?.drop();
    await server?.stop();
  });

  const chunkCount = async (messageId: string) =>
    (
      await pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM message_body_chunks WHERE message_id = $1',
        [messageId],
      )
    ).rows[0].n;

  test('a 40 MB body written inside a transaction that rolls back leaves nothing', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const written = await writeBodyChunks(client, 'm.rolled-back', randomBody(BODY_BYTES).stream);
      assert.deepEqual(written, {
        bytes: BODY_BYTES,
        chunks: Math.ceil(BODY_BYTES / BODY_CHUNK_BYTES),
      });
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    assert.equal(await chunkCount('m.rolled-back'), 0);
    await assert.rejects(
      consume(readBodyChunks(pool, 'm.rolled-back'), 0),
      /m\.rolled-back: its body is missing/,
    );
  });

  test('committed, it reads back byte for byte, one piece at a time: the reader grows by far less than the body', async () => {
    const body = randomBody(BODY_BYTES);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await writeBodyChunks(client, 'm.kept', body.stream);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    assert.equal(await chunkCount('m.kept'), Math.ceil(BODY_BYTES / BODY_CHUNK_BYTES));
    const sizes = await pool.query<{ seq: number; size: number }>(
      'SELECT seq, octet_length(bytes) AS size FROM message_body_chunks WHERE message_id = $1 ORDER BY seq',
      ['m.kept'],
    );
    assert.ok(
      sizes.rows.slice(0, -1).every((r) => r.size === BODY_CHUNK_BYTES),
      'every piece but the last is full',
    );
    assert.equal(sizes.rows.at(-1)!.size, BODY_BYTES % BODY_CHUNK_BYTES);

    const baseline = process.memoryUsage.rss();
    const read = await consume(readBodyChunks(pool, 'm.kept'), baseline);
    assert.equal(read.bytes, BODY_BYTES);
    assert.equal(read.digest, body.digest());
    // Measured 1-15 MB on a quiet machine, 21 MB once under a full parallel suite: the spent
    // pieces (and their hex text) until V8 collects them. A reader that held the body whole
    // would add at least the 40 MB, so three quarters of it still tells the two apart.
    assert.ok(
      read.peakGrowth < (BODY_BYTES * 3) / 4,
      `RSS grew by ${(read.peakGrowth / 1e6).toFixed(1)} MB while reading a ${(BODY_BYTES / 1e6).toFixed(0)} MB body`,
    );
  });

  test('small bodies: an empty one is one empty piece, pieces split exactly at the chunk size, and a missing piece fails the reader', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      assert.deepEqual(await writeBodyChunks(client, 'm.empty', Readable.from([])), {
        bytes: 0,
        chunks: 1,
      });
      assert.deepEqual(
        await writeBodyChunks(
          client,
          'm.small',
          Readable.from([Buffer.from('Subject: a\r\n'), Buffer.from('\r\nbody\r\n')]),
          5,
        ),
        { bytes: 20, chunks: 4 },
      );
      await writeBodyChunks(client, 'm.holed', Readable.from([Buffer.from('0123456789')]), 4);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    assert.equal((await consume(readBodyChunks(pool, 'm.empty'), 0)).bytes, 0);
    const chunks: Buffer[] = [];
    for await (const piece of readBodyChunks(pool, 'm.small')) chunks.push(piece as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), 'Subject: a\r\n\r\nbody\r\n');
    assert.deepEqual(
      chunks.map((c) => c.length),
      [5, 5, 5, 5],
    );
    await pool.query("DELETE FROM message_body_chunks WHERE message_id = 'm.holed' AND seq = 1");
    await assert.rejects(
      consume(readBodyChunks(pool, 'm.holed'), 0),
      /m\.holed: piece 1 of its body is missing/,
    );
  });
});
