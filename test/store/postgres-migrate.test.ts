import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import type { Logger } from '../../src/log.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresMigrations } from '../../src/store/postgres/migrations.js';
import {
  freshDatabase,
  postgresUnavailable,
  startPrivatePostgres,
  type TestPostgres,
  testPool,
} from '../support/postgres.js';

/** A logger whose lines are kept, parsed, for the test to read. */
function recordingLogger(): { logger: Logger; lines: { msg: string; version?: number }[] } {
  const lines: { msg: string; version?: number }[] = [];
  return {
    lines,
    logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
  };
}

describe('migrating a PostgreSQL database', { skip: postgresUnavailable() }, () => {
  let server: TestPostgres;
  before(async () => {
    server = await startPrivatePostgres();
  });
  after(async () => server?.stop());

  test('three nodes starting together on one database apply each version exactly once, in order', async () => {
    const database = await freshDatabase(server.url);
    // One pool per node, as three processes would have.
    const nodes = [1, 2, 3].map(() => ({ pool: testPool(database.url, 2), ...recordingLogger() }));
    try {
      await Promise.all(nodes.map((n) => migratePostgres(n.pool, n.logger)));
      const applied = nodes.flatMap((n) =>
        n.lines.filter((l) => l.msg === 'migration applied').map((l) => l.version),
      );
      assert.deepEqual(
        [...applied].sort((a, b) => a! - b!),
        postgresMigrations.map((m) => m.version),
        'each version applied by one node',
      );
      const recorded = await nodes[0].pool.query<{ version: number; name: string }>(
        'SELECT version, name FROM schema_migrations ORDER BY applied_at, version',
      );
      assert.deepEqual(
        recorded.rows,
        postgresMigrations.map((m) => ({ version: m.version, name: m.name })),
      );

      // A node started later finds nothing to do.
      const late = recordingLogger();
      await migratePostgres(nodes[0].pool, late.logger);
      assert.deepEqual(late.lines, []);
    } finally {
      await Promise.all(nodes.map((n) => n.pool.end()));
      await database.drop();
    }
  });

  test('a migration that fails rolls back alone: the versions before it stay, it is not recorded, and it is thrown', async () => {
    const database = await freshDatabase(server.url);
    const pool = testPool(database.url, 1);
    try {
      const broken = [
        ...postgresMigrations.slice(0, 2),
        {
          version: 3,
          name: 'broken',
          sql: 'CREATE TABLE half_done (id TEXT); SELECT no_such_function();',
        },
      ];
      await assert.rejects(
        migratePostgres(pool, recordingLogger().logger, broken),
        /no_such_function/,
      );
      const recorded = await pool.query<{ version: number }>(
        'SELECT version FROM schema_migrations ORDER BY version',
      );
      assert.deepEqual(
        recorded.rows.map((r) => r.version),
        [1, 2],
      );
      const halfDone = await pool.query("SELECT 1 FROM pg_tables WHERE tablename = 'half_done'");
      assert.equal(halfDone.rowCount, 0);
      // The pool's connection is still usable, and the real list completes the database.
      await migratePostgres(pool, recordingLogger().logger);
      const all = await pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM schema_migrations',
      );
      assert.equal(all.rows[0].n, postgresMigrations.length);
    } finally {
      await pool.end();
      await database.drop();
    }
  });
});
