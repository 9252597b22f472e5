import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import type pg from 'pg';
import { postgresQueries, translatePlaceholders } from '../../src/store/postgres/queries.js';
import { type Queries, sqliteQueries } from '../../src/store/queries.js';
import { tempDirs } from '../support/hooks.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  startPrivatePostgres,
  type TestPostgres,
  testPool,
} from '../support/postgres.js';

/**
 * The store's statements run unchanged on both engines (src/store/queries.ts): the same calls
 * give the same rows, in SQLite's shapes, and the same transaction outcomes.
 */

const stateDir = tempDirs('postern-queries-');

/** One table in each dialect's words; every statement below is shared. */
const SQLITE_TABLE =
  'CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, at INTEGER NOT NULL, flag INTEGER NOT NULL DEFAULT 0, body BLOB)';
const POSTGRES_TABLE =
  'CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL, at BIGINT NOT NULL, flag INTEGER NOT NULL DEFAULT 0, body BYTEA)';

interface Item {
  id: number;
  name: string;
  at: number;
  flag: number;
  body: Buffer | null;
}

const AT = Date.UTC(2026, 10, 26, 12, 0, 0);

interface Engine {
  name: string;
  q: Queries;
  /** Rows as another connection sees them (what was committed). */
  committedCount(): Promise<number>;
  close(): Promise<void>;
}

function sqliteEngine(): Engine {
  const file = path.join(stateDir(), 'items.db');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec(SQLITE_TABLE);
  const other = new Database(file, { readonly: true });
  return {
    name: 'sqlite',
    q: sqliteQueries(db),
    committedCount: async () =>
      (other.prepare('SELECT count(*) AS n FROM items').get() as { n: number }).n,
    close: async () => {
      other.close();
      db.close();
    },
  };
}

async function postgresEngine(server: TestPostgres): Promise<Engine> {
  const database: FreshDatabase = await freshDatabase(server.url);
  const pool: pg.Pool = testPool(database.url, 4);
  await pool.query(POSTGRES_TABLE);
  const other = testPool(database.url, 1);
  return {
    name: 'postgres',
    q: postgresQueries(pool),
    committedCount: async () =>
      Number((await other.query('SELECT count(*) AS n FROM items')).rows[0].n),
    close: async () => {
      await other.end();
      await pool.end();
      await database.drop();
    },
  };
}

describe('placeholders rewritten for PostgreSQL', () => {
  test('? are numbered in order, outside literals, quoted names and comments', () => {
    const t = translatePlaceholders(
      `SELECT '?', "a?" FROM t -- why?\n WHERE a = ? /* ? */ AND b = 'it''s ?' AND c = ?`,
    );
    assert.equal(
      t.text,
      `SELECT '?', "a?" FROM t -- why?\n WHERE a = $1 /* ? */ AND b = 'it''s ?' AND c = $2`,
    );
    assert.equal(t.names, null);
  });

  test('@name binds one parameter per name, however often it is used', () => {
    const t = translatePlaceholders('UPDATE t SET a = @a, b = @b WHERE a <> @a');
    assert.equal(t.text, 'UPDATE t SET a = $1, b = $2 WHERE a <> $1');
    assert.deepEqual(t.names, ['a', 'b']);
  });

  test('a statement mixing ? and @name is refused', () => {
    assert.throws(() => translatePlaceholders('SELECT ? , @a'), /mixes \? and @name/);
  });
});

const unavailable = postgresUnavailable();

describe('Queries on both engines', () => {
  let server: TestPostgres | null = null;
  before(async () => {
    if (!unavailable) server = await startPrivatePostgres();
  });
  after(async () => server?.stop());

  const engines: { name: string; make: () => Promise<Engine>; skip: string | false }[] = [
    { name: 'sqlite', make: async () => sqliteEngine(), skip: false },
    { name: 'postgres', make: () => postgresEngine(server!), skip: unavailable },
  ];

  for (const { name, make, skip } of engines) {
    describe(name, { skip }, () => {
      let engine: Engine;
      before(async () => {
        engine = await make();
      });
      after(async () => engine?.close());

      test('rows come back in SQLite shapes: big integers as numbers, blobs as buffers, comparisons as 1/0', async () => {
        const { q } = engine;
        await q.run('DELETE FROM items');
        assert.equal(
          await q.run(
            'INSERT INTO items (id, name, at, flag, body) VALUES (?, ?, ?, ?, ?)',
            1,
            'one',
            AT,
            true,
            Buffer.from('abc'),
          ),
          1,
        );
        await q.run(
          'INSERT INTO items (id, name, at, flag, body) VALUES (@id, @name, @at, @flag, @body)',
          { id: 2, name: 'two', at: AT + 1, flag: false, body: null },
        );
        const row = await q.get<Item>('SELECT * FROM items WHERE id = ?', 1);
        assert.deepEqual(row, { id: 1, name: 'one', at: AT, flag: 1, body: Buffer.from('abc') });
        assert.equal(await q.get('SELECT * FROM items WHERE id = ?', 99), undefined);
        const all = await q.all<{ id: number; late: number }>(
          'SELECT id, at > ? AS late FROM items ORDER BY id',
          AT,
        );
        assert.deepEqual(all, [
          { id: 1, late: 0 },
          { id: 2, late: 1 },
        ]);
        const sums = await q.get<{ n: number; total: number }>(
          'SELECT count(*) AS n, sum(at) AS total FROM items',
        );
        assert.deepEqual(sums, { n: 2, total: 2 * AT + 1 });
        assert.equal(await q.run('UPDATE items SET flag = ? WHERE flag = ?', 1, 0), 1);
      });

      test('a transaction commits together, and one that throws leaves nothing', async () => {
        const { q } = engine;
        await q.run('DELETE FROM items');
        await q.transaction(async (tx) => {
          await tx.run('INSERT INTO items (id, name, at) VALUES (?, ?, ?)', 1, 'a', AT);
          await tx.run('INSERT INTO items (id, name, at) VALUES (?, ?, ?)', 2, 'b', AT);
          assert.equal(await engine.committedCount(), 0, 'not visible before commit');
        });
        assert.equal(await engine.committedCount(), 2);
        await assert.rejects(
          q.transaction(async (tx) => {
            await tx.run('INSERT INTO items (id, name, at) VALUES (?, ?, ?)', 3, 'c', AT);
            throw new Error('changed my mind');
          }),
          /changed my mind/,
        );
        assert.equal(await engine.committedCount(), 2);
        // The connection is usable after the rollback.
        assert.equal((await q.get<{ n: number }>('SELECT count(*) AS n FROM items'))!.n, 2);
      });

      test('a nested transaction is a savepoint: it rolls back alone', async () => {
        const { q } = engine;
        await q.run('DELETE FROM items');
        const outcomes = await q.transaction(async (tx) => {
          const results: string[] = [];
          for (const id of [1, 2, 2, 3]) {
            try {
              await tx.transaction(async (unit) => {
                await unit.run(
                  'INSERT INTO items (id, name, at) VALUES (?, ?, ?)',
                  id,
                  `n${id}`,
                  AT,
                );
                await unit.run('UPDATE items SET flag = 1 WHERE id = ?', id);
              });
              results.push('ok');
            } catch {
              results.push('refused');
            }
          }
          return results;
        });
        assert.deepEqual(outcomes, ['ok', 'ok', 'refused', 'ok']);
        assert.deepEqual(await q.all('SELECT id, flag FROM items ORDER BY id'), [
          { id: 1, flag: 1 },
          { id: 2, flag: 1 },
          { id: 3, flag: 1 },
        ]);
      });

      test('transactions started together run one after another and both commit', async () => {
        const { q } = engine;
        await q.run('DELETE FROM items');
        await q.run('INSERT INTO items (id, name, at) VALUES (1, ?, 0)', 'counter');
        const bump = () =>
          q.transaction(async (tx) => {
            const { at } = (await tx.get<{ at: number }>(
              engine.q.dialect === 'postgres'
                ? 'SELECT at FROM items WHERE id = 1 FOR UPDATE'
                : 'SELECT at FROM items WHERE id = 1',
            ))!;
            await tx.run('UPDATE items SET at = ? WHERE id = 1', at + 1);
          });
        await Promise.all(Array.from({ length: 20 }, bump));
        assert.equal((await q.get<{ at: number }>('SELECT at FROM items WHERE id = 1'))!.at, 20);
      });

      test('iterate reads every row in pieces, and stopping early frees the connection', async () => {
        const { q } = engine;
        await q.run('DELETE FROM items');
        await q.transaction(async (tx) => {
          for (let id = 1; id <= 1234; id++)
            await tx.run(
              'INSERT INTO items (id, name, at) VALUES (?, ?, ?)',
              id,
              `n${id}`,
              AT + id,
            );
        });
        let count = 0;
        let sum = 0;
        for await (const row of q.iterate<Item>(
          'SELECT id, at FROM items WHERE at > ? ORDER BY id',
          AT,
        )) {
          count += 1;
          sum += row.at - AT;
        }
        assert.equal(count, 1234);
        assert.equal(sum, (1234 * 1235) / 2);
        for (let round = 0; round < 6; round++) {
          for await (const row of q.iterate<Item>('SELECT id FROM items ORDER BY id')) {
            if (row.id === 3) break;
          }
        }
        // Six early stops on a pool of four: had any kept its connection, this would wait forever.
        assert.equal((await q.get<{ n: number }>('SELECT count(*) AS n FROM items'))!.n, 1234);
      });
    });
  }
});
