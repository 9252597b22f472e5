import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { allValues, type Queries } from '../../src/store/queries.js';
import type { HttpResult } from './postern.js';
import { databaseFor, testPool, testStore } from './postgres.js';

/** Every file under `<stateDir>/spool` (temp and day directories), sorted. */
export function spoolFiles(stateDir: string): string[] {
  return readdirSync(path.join(stateDir, 'spool'), { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => path.join(d.parentPath ?? d.path, d.name))
    .sort();
}

/** Every stored MIME: the spool's files, and `index:<id>` for each body the index keeps (sorted). */
export function storedMimeList(stateDir: string): string[] {
  return [
    ...spoolFiles(stateDir),
    ...[...heldBodySizes(stateDir).keys()].map((id) => `index:${id}`),
  ].sort();
}

/** How many messages' MIME is stored: files in the spool, and bodies the index keeps. */
export function storedMimeCount(stateDir: string): number {
  return (
    spoolFiles(stateDir).filter((f) => f.endsWith('.eml')).length + heldBodySizes(stateDir).size
  );
}

/** The bodies the index keeps (small messages), by message id: their sizes in bytes. */
export function heldBodySizes(stateDir: string): Map<string, number> {
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    const rows = db
      .prepare('SELECT message_id, length(mime) AS size FROM message_bodies')
      .all() as { message_id: string; size: number }[];
    return new Map(rows.map((r) => [r.message_id, r.size]));
  } finally {
    db.close();
  }
}

/** An exact error envelope without details, taking the human message from the response. */
export function assertErrorEnvelope(
  res: HttpResult,
  status: number,
  type: string,
  code: string,
): void {
  assert.equal(res.status, status, res.text);
  assert.equal(typeof res.body?.error?.message, 'string', res.text);
  assert.deepEqual(res.body, { error: { type, code, message: res.body.error.message } });
}

export function assertAccepted(res: HttpResult, status = 'queued'): void {
  assert.equal(res.status, 202, res.text);
  assert.equal(res.body.status, status, res.text);
}

const DAY_DIR = /^\d{4}-\d{2}-\d{2}$/;

/** What a spool holds: temp files, and stored files as `<day>/<name>` (sorted). */
export function spoolSnapshot(stateDir: string): { tmpFiles: string[]; dayFiles: string[] } {
  const root = path.join(stateDir, 'spool');
  const tmpDir = path.join(root, 'tmp');
  const tmpFiles = existsSync(tmpDir) ? readdirSync(tmpDir) : [];
  const dayFiles: string[] = [];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (!entry.isDirectory() || !DAY_DIR.test(entry.name)) continue;
    for (const name of readdirSync(path.join(root, entry.name)))
      dayFiles.push(path.join(entry.name, name));
  }
  return { tmpFiles, dayFiles: dayFiles.sort() };
}

/** Every message row of a (stopped or running) server's index, by id, read-only. */
export function readMessageRows<Row extends { id: string }>(stateDir: string): Map<string, Row> {
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    const rows = db.prepare('SELECT * FROM messages').all() as Row[];
    return new Map(rows.map((r) => [r.id, r]));
  } finally {
    db.close();
  }
}

/** The columns of a message row every crash and stream suite reads. */
export interface StoredRow {
  id: string;
  status: string;
  source: string;
  spool_path: string;
  size_bytes: number;
}

/** What a SIGKILL left: the spool's files, the committed rows by id, and how many renamed files no committed row names. */
export function leftByKill<Row extends { id: string }>(
  stateDir: string,
): { debris: ReturnType<typeof spoolSnapshot>; rows: Map<string, Row>; orphans: number } {
  const debris = spoolSnapshot(stateDir);
  const rows = readMessageRows<Row>(stateDir);
  return {
    debris,
    rows,
    orphans: debris.dayFiles.filter((rel) => !rows.has(path.basename(rel, '.eml'))).length,
  };
}

/** Ids of the messages that have their `mail.accepted` event. */
export function acceptedEventIds(stateDir: string): Set<string> {
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    return new Set(
      db
        .prepare("SELECT message_id FROM events WHERE type = 'mail.accepted'")
        .pluck()
        .all() as string[],
    );
  } finally {
    db.close();
  }
}

/**
 * What reconciliation leaves behind after a crash: nothing in spool/tmp, no stored file without
 * its index row, no row without its file or, for a small message, its body in the index.
 */
export function assertSpoolConsistent(
  stateDir: string,
  rows: Map<string, { spool_path: string; last_error: string | null }>,
): void {
  const snap = spoolSnapshot(stateDir);
  assert.deepEqual(snap.tmpFiles, [], 'nothing is left in spool/tmp');
  const orphans = snap.dayFiles.filter((rel) => {
    const row = rows.get(path.basename(rel, '.eml'));
    return !rel.endsWith('.eml') || row === undefined || row.spool_path !== rel;
  });
  assert.deepEqual(orphans, [], 'every spooled file has its index row');
  const held = heldBodySizes(stateDir);
  const withoutBody = [...rows.entries()].filter(
    ([id, r]) =>
      r.last_error === 'spool_file_missing' ||
      (r.spool_path === ''
        ? !(held.get(id)! > 0)
        : !existsSync(path.join(stateDir, 'spool', r.spool_path))),
  );
  assert.deepEqual(
    withoutBody.map(([id]) => id),
    [],
    'no index row lacks its file or its body',
  );
}

/**
 * `fn` on the state directory's PostgreSQL database (POSTERN_TEST_STORE=postgres), on a
 * connection of its own: the async helpers below read what a (stopped or running) node stored.
 */
async function withStateDatabase<T>(stateDir: string, fn: (q: Queries) => Promise<T>): Promise<T> {
  const pool = testPool((await databaseFor(stateDir)).url, 1);
  try {
    return await fn(postgresQueries(pool));
  } finally {
    await pool.end();
  }
}

/** readMessageRows on either backend. */
export async function messageRowsOf<Row extends { id: string }>(
  stateDir: string,
): Promise<Map<string, Row>> {
  if (testStore() !== 'postgres') return readMessageRows<Row>(stateDir);
  const rows = await withStateDatabase(stateDir, (q) => q.all<Row>('SELECT * FROM messages'));
  return new Map(rows.map((r) => [r.id, r]));
}

/** acceptedEventIds on either backend. */
export async function acceptedEventIdsOf(stateDir: string): Promise<Set<string>> {
  if (testStore() !== 'postgres') return acceptedEventIds(stateDir);
  return new Set(
    await withStateDatabase(stateDir, (q) =>
      allValues<string>(q, "SELECT message_id FROM events WHERE type = 'mail.accepted'"),
    ),
  );
}

/** leftByKill on either backend (on PostgreSQL the spool holds only a node's scratch files). */
export async function leftByKillOf<Row extends { id: string }>(
  stateDir: string,
): Promise<ReturnType<typeof leftByKill<Row>>> {
  if (testStore() !== 'postgres') return leftByKill<Row>(stateDir);
  const debris = spoolSnapshot(stateDir);
  const rows = await messageRowsOf<Row>(stateDir);
  return {
    debris,
    rows,
    orphans: debris.dayFiles.filter((rel) => !rows.has(path.basename(rel, '.eml'))).length,
  };
}

/**
 * assertSpoolConsistent on either backend. On PostgreSQL every body is rows of
 * message_body_chunks: nothing is left in spool/tmp, no spool file is written at all, and every
 * message row has its body (piece 0 onwards, as many bytes as its size_bytes).
 */
export async function assertStoreConsistent(
  stateDir: string,
  rows: Map<string, { spool_path: string; last_error: string | null; size_bytes?: number }>,
): Promise<void> {
  if (testStore() !== 'postgres') return assertSpoolConsistent(stateDir, rows);
  const snap = spoolSnapshot(stateDir);
  assert.deepEqual(snap.tmpFiles, [], 'nothing is left in spool/tmp');
  assert.deepEqual(snap.dayFiles, [], 'no spool file: the bodies are in the database');
  const bodies = await withStateDatabase(stateDir, (q) =>
    q.all<{ message_id: string; pieces: number; last_seq: number; bytes: number }>(
      'SELECT message_id, COUNT(*) AS pieces, MAX(seq) AS last_seq, SUM(length(bytes)) AS bytes FROM message_body_chunks GROUP BY message_id',
    ),
  );
  const byId = new Map(bodies.map((b) => [b.message_id, b]));
  const withoutBody = [...rows.entries()].filter(([id, r]) => {
    const body = byId.get(id);
    return (
      r.last_error === 'spool_file_missing' ||
      !body ||
      body.pieces !== body.last_seq + 1 ||
      (r.size_bytes !== undefined && Number(body.bytes) !== r.size_bytes)
    );
  });
  assert.deepEqual(
    withoutBody.map(([id]) => id),
    [],
    'no message row lacks its body (or a piece of it)',
  );
  assert.deepEqual(
    bodies.filter((b) => !rows.has(b.message_id)).map((b) => b.message_id),
    [],
    'no body without its message row',
  );
}
