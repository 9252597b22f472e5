/**
 * What a server stored, read on whichever backend the suites run against (POSTERN_TEST_STORE):
 * the async, backend-neutral twins of the SQLite-only readers in assertions.ts. On SQLite a
 * body is a spool file or, for a small message, a row of message_bodies; on PostgreSQL every
 * body is rows of message_body_chunks and the node keeps no spool file (spool/tmp is scratch).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { allValues, type Queries, sqliteQueries } from '../../src/store/queries.js';
import { spoolFiles, spoolSnapshot } from './assertions.js';
import { databaseFor, testPool, testStore } from './postgres.js';

/**
 * Runs `fn` on the store of a (stopped or running) server's state directory: its SQLite index
 * opened read-only, or the state directory's PostgreSQL database (postgres.ts, databaseFor).
 */
export async function withStateStore<T>(
  stateDir: string,
  fn: (q: Queries) => Promise<T>,
): Promise<T> {
  if (testStore() === 'postgres') {
    const pool = testPool((await databaseFor(stateDir)).url, 2);
    try {
      return await fn(postgresQueries(pool));
    } finally {
      await pool.end();
    }
  }
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    return await fn(sqliteQueries(db));
  } finally {
    db.close();
  }
}

/** Every message row, by id. */
export async function messageRowsIn<Row extends { id: string }>(
  q: Queries,
): Promise<Map<string, Row>> {
  const rows = await q.all<Row>('SELECT * FROM messages');
  return new Map(rows.map((r) => [r.id, r]));
}

/** Ids of the messages that have their `mail.accepted` event. */
export async function acceptedEventIdsIn(q: Queries): Promise<Set<string>> {
  return new Set(
    await allValues<string>(q, "SELECT message_id FROM events WHERE type = 'mail.accepted'"),
  );
}

/** The bodies the store keeps (SQLite: small messages' message_bodies; PostgreSQL: every body's chunks), by message id: their sizes in bytes. */
export async function storeBodySizesIn(q: Queries): Promise<Map<string, number>> {
  const rows =
    q.dialect === 'postgres'
      ? await q.all<{ message_id: string; size: number }>(
          'SELECT message_id, SUM(length(bytes)) AS size FROM message_body_chunks GROUP BY message_id',
        )
      : await q.all<{ message_id: string; size: number }>(
          'SELECT message_id, length(mime) AS size FROM message_bodies',
        );
  return new Map(rows.map((r) => [r.message_id, r.size]));
}

/**
 * A body kept as message_body_chunks (PostgreSQL), whole: its pieces in order, every piece from
 * 0 on present; throws when it has none.
 */
export async function bodyFromChunks(q: Queries, id: string): Promise<Buffer> {
  const pieces = await q.all<{ seq: number; bytes: Buffer }>(
    'SELECT seq, bytes FROM message_body_chunks WHERE message_id = ? ORDER BY seq',
    id,
  );
  if (pieces.length === 0) throw new Error(`message ${id}: its body is missing from the database`);
  pieces.forEach((p, i) => {
    if (p.seq !== i)
      throw new Error(`message ${id}: piece ${i} of its body is missing from the database`);
  });
  return Buffer.concat(pieces.map((p) => p.bytes));
}

/** Every stored MIME: the spool's files, and `index:<id>` for each body the store keeps (sorted). */
export async function storedMimeListIn(q: Queries, stateDir: string): Promise<string[]> {
  return [
    ...spoolFiles(stateDir),
    ...[...(await storeBodySizesIn(q)).keys()].map((id) => `index:${id}`),
  ].sort();
}

/** How many messages' MIME is stored: files in the spool, and bodies the store keeps. */
export async function storedMimeCountIn(q: Queries, stateDir: string): Promise<number> {
  return (
    spoolFiles(stateDir).filter((f) => f.endsWith('.eml')).length + (await storeBodySizesIn(q)).size
  );
}

/**
 * What reconciliation (SQLite) or the database's transactions (PostgreSQL) leave behind after a
 * crash: nothing in spool/tmp, no stored file without its row (on PostgreSQL no stored file at
 * all), no row without its body (a file, or a body in the store).
 */
export async function assertStoreConsistent(
  q: Queries,
  stateDir: string,
  rows: Map<string, { spool_path: string; last_error: string | null }>,
): Promise<void> {
  const snap = spoolSnapshot(stateDir);
  assert.deepEqual(snap.tmpFiles, [], 'nothing is left in spool/tmp');
  const bodies = await storeBodySizesIn(q);
  if (q.dialect === 'postgres') {
    assert.deepEqual(
      snap.dayFiles,
      [],
      'a node on PostgreSQL keeps no spool file: the bodies are in the database',
    );
    const withoutBody = [...rows.entries()].filter(
      ([id, r]) => r.last_error === 'spool_file_missing' || !(bodies.get(id)! > 0),
    );
    assert.deepEqual(
      withoutBody.map(([id]) => id),
      [],
      'no row lacks its body in the database',
    );
    assert.deepEqual(
      [...bodies.keys()].filter((id) => !rows.has(id)),
      [],
      'no body without its row',
    );
    return;
  }
  const orphans = snap.dayFiles.filter((rel) => {
    const row = rows.get(path.basename(rel, '.eml'));
    return !rel.endsWith('.eml') || row === undefined || row.spool_path !== rel;
  });
  assert.deepEqual(orphans, [], 'every spooled file has its index row');
  const withoutBody = [...rows.entries()].filter(
    ([id, r]) =>
      r.last_error === 'spool_file_missing' ||
      (r.spool_path === ''
        ? !(bodies.get(id)! > 0)
        : !existsSync(path.join(stateDir, 'spool', r.spool_path))),
  );
  assert.deepEqual(
    withoutBody.map(([id]) => id),
    [],
    'no index row lacks its file or its body',
  );
}
