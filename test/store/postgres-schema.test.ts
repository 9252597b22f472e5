import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { silentLogger } from '../../src/log.js';
import { type Db, openDatabase } from '../../src/store/db.js';
import { migrations } from '../../src/store/migrations.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresMigrations } from '../../src/store/postgres/migrations.js';
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
 * The PostgreSQL schema (src/store/postgres/migrations.ts) against the SQLite one it
 * translates (src/store/migrations.ts): both migrated from nothing, then compared table by
 * table, so a version added to one list and not the other, or translated loosely, fails here.
 */

/** Tables only PostgreSQL has (bodies in chunks: with several nodes there is no local spool). */
const POSTGRES_ONLY_TABLES = ['message_body_chunks'];

/**
 * Rowid keys every insert names (a migration's version, the one-row tables pinned to id = 1, an
 * event's seq queued for fan-out).
 */
const KEYS_WRITTEN_BY_THE_CODE = [
  'schema_migrations.version',
  'webhook_cursor.id',
  'policy_generation.id',
  'webhook_fanout_pending.event_seq',
  'viewer_key.id',
];

/**
 * Triggers only PostgreSQL has. events_webhook_fanout_pending queues every inserted event for the
 * nodes' fan-out (migration 12): on SQLite an unused copy could not stay unused, it would fire on
 * every event and fill a table nothing empties, so there is none (SQLite's one dispatcher follows
 * webhook_cursor instead).
 */
const POSTGRES_ONLY_TRIGGERS = ['events_webhook_fanout_pending'];

const stateDir = tempDirs('postern-pg-schema-');

interface Column {
  name: string;
  type: string;
  notNull: boolean;
  defaultValue: string | null;
  /** Position in the primary key, 1-based; 0 if not in it. */
  pk: number;
  nocase: boolean;
}

interface Index {
  name: string;
  columns: string[];
  unique: boolean;
  partial: boolean;
  /** SQLite: 'c' CREATE INDEX, 'u' a UNIQUE constraint, 'pk' a PRIMARY KEY; PostgreSQL: 'pk' or 'c'. */
  origin: string;
}

interface Table {
  columns: Column[];
  indexes: Index[];
  foreignKeys: string[];
  /** The quoted values every CHECK of the table names, sorted ('live', 'test', …). */
  checkValues: string[];
  checks: number;
}

/** The parenthesised expressions after each CHECK in a CREATE TABLE statement. */
function checkExpressions(createSql: string): string[] {
  const found: string[] = [];
  for (const m of createSql.matchAll(/\bCHECK\s*\(/gi)) {
    let depth = 0;
    const start = m.index + m[0].length - 1;
    for (let i = start; i < createSql.length; i++) {
      if (createSql[i] === '(') depth++;
      else if (createSql[i] === ')' && --depth === 0) {
        found.push(createSql.slice(start, i + 1));
        break;
      }
    }
  }
  return found;
}

const quotedValues = (expressions: string[]) =>
  expressions.flatMap((e) => [...e.matchAll(/'([^']*)'/g)].map((m) => m[1])).sort();

/** Strips PostgreSQL's casts from a default ('fallback'::text → 'fallback'). */
const plainDefault = (value: string | null) =>
  value === null ? null : value.replace(/::[a-z ]+$/i, '');

function sqliteSchema(db: Db): Map<string, Table> {
  const tables = new Map<string, Table>();
  const rows = db
    .prepare(
      "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )
    .all() as { name: string; sql: string }[];
  for (const { name, sql } of rows) {
    const nocase = new Set([...sql.matchAll(/(\w+)\s+TEXT[^,]*COLLATE NOCASE/gi)].map((m) => m[1]));
    const columns = (
      db.prepare(`PRAGMA table_info(${name})`).all() as {
        name: string;
        type: string;
        notnull: number;
        dflt_value: string | null;
        pk: number;
      }[]
    ).map((c) => ({
      name: c.name,
      type: c.type,
      notNull: c.notnull === 1,
      defaultValue: c.dflt_value,
      pk: c.pk,
      nocase: nocase.has(c.name),
    }));
    const indexes = (
      db.prepare(`PRAGMA index_list(${name})`).all() as {
        name: string;
        unique: number;
        origin: string;
        partial: number;
      }[]
    ).map((ix) => ({
      name: ix.name,
      columns: (
        db.prepare(`PRAGMA index_info(${JSON.stringify(ix.name)})`).all() as {
          seqno: number;
          name: string;
        }[]
      )
        .sort((a, b) => a.seqno - b.seqno)
        .map((c) => c.name),
      unique: ix.unique === 1,
      partial: ix.partial === 1,
      origin: ix.origin,
    }));
    const foreignKeys = (
      db.prepare(`PRAGMA foreign_key_list(${name})`).all() as {
        table: string;
        from: string;
        to: string;
        on_delete: string;
      }[]
    )
      .map((fk) => `${fk.from} → ${fk.table}(${fk.to}) on delete ${fk.on_delete.toLowerCase()}`)
      .sort();
    const checks = checkExpressions(sql);
    tables.set(name, {
      columns,
      indexes,
      foreignKeys,
      checkValues: quotedValues(checks),
      checks: checks.length,
    });
  }
  return tables;
}

async function postgresSchema(
  client: pg.Client,
): Promise<Map<string, Table & { identity: Set<string> }>> {
  const tables = new Map<string, Table & { identity: Set<string> }>();
  const tableRows = await client.query<{ name: string }>(
    "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
  );
  for (const { name } of tableRows.rows)
    tables.set(name, {
      columns: [],
      indexes: [],
      foreignKeys: [],
      checkValues: [],
      checks: 0,
      identity: new Set(),
    });
  const columns = await client.query<{
    table_name: string;
    column_name: string;
    data_type: string;
    udt_name: string;
    is_nullable: string;
    column_default: string | null;
    is_identity: string;
  }>(
    "SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default, is_identity FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
  );
  const indexes = await client.query<{
    table_name: string;
    name: string;
    unique: boolean;
    primary: boolean;
    partial: boolean;
    columns: string[];
  }>(`
    SELECT t.relname AS table_name, i.relname AS name, ix.indisunique AS unique, ix.indisprimary AS primary, ix.indpred IS NOT NULL AS partial,
      array(SELECT a.attname::text FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.ord) AS columns
    FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class t ON t.oid = ix.indrelid
    JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = 'public'`);
  const constraints = await client.query<{ table_name: string; type: string; definition: string }>(`
    SELECT t.relname AS table_name, c.contype AS type, pg_get_constraintdef(c.oid) AS definition
    FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = 'public' AND c.contype IN ('c', 'f')`);
  for (const ix of indexes.rows) {
    tables.get(ix.table_name)!.indexes.push({
      name: ix.name,
      columns: ix.columns,
      unique: ix.unique,
      partial: ix.partial,
      origin: ix.primary ? 'pk' : 'c',
    });
  }
  for (const c of columns.rows) {
    const table = tables.get(c.table_name)!;
    const primary = table.indexes.find((ix) => ix.origin === 'pk');
    table.columns.push({
      name: c.column_name,
      type: c.data_type === 'USER-DEFINED' ? c.udt_name : c.data_type,
      notNull: c.is_nullable === 'NO',
      defaultValue: plainDefault(c.column_default),
      pk: primary ? primary.columns.indexOf(c.column_name) + 1 : 0,
      nocase: c.udt_name === 'citext',
    });
    if (c.is_identity === 'YES') table.identity.add(c.column_name);
  }
  for (const c of constraints.rows) {
    const table = tables.get(c.table_name)!;
    if (c.type === 'c') {
      table.checks++;
      table.checkValues = [
        ...table.checkValues,
        ...quotedValues([c.definition]).filter((v) => v !== ''),
      ].sort();
    } else {
      const m =
        /^FOREIGN KEY \((\w+)\) REFERENCES (\w+)\((\w+)\)(?: ON DELETE (\w+(?: \w+)?))?/.exec(
          c.definition,
        );
      assert.ok(m, `${c.table_name}: unexpected foreign key ${c.definition}`);
      table.foreignKeys = [
        ...table.foreignKeys,
        `${m[1]} → ${m[2]}(${m[3]}) on delete ${(m[4] ?? 'no action').toLowerCase()}`,
      ].sort();
    }
  }
  return tables;
}

/** PostgreSQL types that hold what a SQLite column of this declared type holds. */
const COMPATIBLE_TYPES: Record<string, string[]> = {
  INTEGER: ['integer', 'bigint'],
  TEXT: ['text'],
  BLOB: ['bytea'],
};

describe('the PostgreSQL schema against the SQLite one', { skip: postgresUnavailable() }, () => {
  let server: TestPostgres;
  let database: FreshDatabase;
  let sqlite: Map<string, Table>;
  let postgres: Awaited<ReturnType<typeof postgresSchema>>;
  let sqliteTriggers: string[];
  let postgresTriggers: string[];

  before(async () => {
    server = await startPrivatePostgres();
    database = await freshDatabase(server.url);
    const pool = testPool(database.url, 2);
    try {
      await migratePostgres(pool, silentLogger());
    } finally {
      await pool.end();
    }
    const db = openDatabase(stateDir(), silentLogger());
    try {
      sqlite = sqliteSchema(db);
      sqliteTriggers = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
        .pluck()
        .all() as string[];
    } finally {
      db.close();
    }
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      postgres = await postgresSchema(client);
      postgresTriggers = (
        await client.query<{ tgname: string }>(
          'SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname',
        )
      ).rows.map((r) => r.tgname);
    } finally {
      await client.end();
    }
  });
  after(async () => {
    await database?.drop();
    await server?.stop();
  });

  test('the two lists of migrations have the same versions, in order, with the same names', () => {
    assert.deepEqual(
      postgresMigrations.map((m) => `${m.version}: ${m.name}`),
      migrations.map((m) => `${m.version}: ${m.name}`),
      'src/store/migrations.ts and src/store/postgres/migrations.ts must gain each version together',
    );
  });

  test('the same tables, PostgreSQL adding only its body chunks', () => {
    assert.ok(sqlite.size > 20, `SQLite has ${sqlite.size} tables`);
    assert.deepEqual(
      [...postgres.keys()].filter((t) => !POSTGRES_ONLY_TABLES.includes(t)),
      [...sqlite.keys()].sort(),
    );
  });

  test('every column: name, a type that holds the same values, NOT NULL, a default, the primary key, case-insensitive where SQLite says NOCASE', () => {
    for (const [name, table] of sqlite) {
      const pgTable = postgres.get(name)!;
      assert.deepEqual(
        pgTable.columns.map((c) => c.name).sort(),
        table.columns.map((c) => c.name).sort(),
        `${name}: columns`,
      );
      for (const column of table.columns) {
        const where = `${name}.${column.name}`;
        const pgColumn = pgTable.columns.find((c) => c.name === column.name)!;
        const expectedTypes = column.nocase ? ['citext'] : COMPATIBLE_TYPES[column.type];
        assert.ok(
          expectedTypes,
          `${where}: SQLite type ${column.type} has no PostgreSQL counterpart listed`,
        );
        assert.ok(
          expectedTypes.includes(pgColumn.type),
          `${where}: ${pgColumn.type}, expected one of ${expectedTypes.join(', ')}`,
        );
        // SQLite lets a primary key column of a rowid table hold NULL unless it says NOT NULL
        // (a compatibility quirk nothing here relies on); PostgreSQL's never does.
        assert.equal(pgColumn.notNull, column.notNull || column.pk > 0, `${where}: NOT NULL`);
        assert.equal(pgColumn.defaultValue, column.defaultValue, `${where}: default`);
        assert.equal(pgColumn.pk, column.pk, `${where}: position in the primary key`);
        // INTEGER PRIMARY KEY numbers new rows in SQLite; in PostgreSQL an identity column does
        // (except where the code always writes the key itself).
        const numbersRows =
          column.type === 'INTEGER' &&
          column.pk === 1 &&
          table.columns.filter((c) => c.pk > 0).length === 1 &&
          !KEYS_WRITTEN_BY_THE_CODE.includes(where);
        assert.equal(pgTable.identity.has(column.name), numbersRows, `${where}: numbers new rows`);
      }
    }
  });

  test('every index: the same name, columns, uniqueness and partiality; UNIQUE and PRIMARY KEY constraints as unique indexes on the same columns', () => {
    for (const [name, table] of sqlite) {
      const pgIndexes = postgres.get(name)!.indexes;
      const matched = new Set<string>();
      for (const ix of table.indexes) {
        const counterpart =
          ix.origin === 'c'
            ? pgIndexes.find((p) => p.name === ix.name)
            : pgIndexes.find(
                (p) =>
                  p.unique &&
                  p.columns.join() === ix.columns.join() &&
                  (ix.origin === 'pk') === (p.origin === 'pk'),
              );
        assert.ok(
          counterpart,
          `${name}: no PostgreSQL index for ${ix.name} (${ix.columns.join(', ')})`,
        );
        assert.deepEqual(
          {
            columns: counterpart.columns,
            unique: counterpart.unique,
            partial: counterpart.partial,
          },
          { columns: ix.columns, unique: ix.unique, partial: ix.partial },
          `${name}: index ${ix.name}`,
        );
        matched.add(counterpart.name);
      }
      // PostgreSQL's other indexes: only the primary key of a table whose key is SQLite's rowid.
      const extra = pgIndexes.filter((p) => !matched.has(p.name));
      for (const p of extra)
        assert.ok(
          p.origin === 'pk' &&
            p.columns.length === 1 &&
            postgres.get(name)!.columns.find((c) => c.name === p.columns[0])!.type !== 'text',
          `${name}: PostgreSQL index ${p.name} has no SQLite counterpart`,
        );
    }
  });

  test('the same foreign keys and CHECK constraints (with the same allowed values)', () => {
    for (const [name, table] of sqlite) {
      const pgTable = postgres.get(name)!;
      assert.deepEqual(pgTable.foreignKeys, table.foreignKeys, `${name}: foreign keys`);
      assert.equal(pgTable.checks, table.checks, `${name}: CHECK constraints`);
      assert.deepEqual(
        pgTable.checkValues,
        table.checkValues,
        `${name}: values named by CHECK constraints`,
      );
    }
  });

  test('the same triggers (the policy generation moved by every change to a policy table), PostgreSQL adding only its fan-out queue', () => {
    assert.equal(sqliteTriggers.length, 12);
    assert.deepEqual(
      postgresTriggers.filter((t) => !POSTGRES_ONLY_TRIGGERS.includes(t)),
      sqliteTriggers,
    );
    assert.deepEqual(
      postgresTriggers.filter((t) => POSTGRES_ONLY_TRIGGERS.includes(t)),
      POSTGRES_ONLY_TRIGGERS,
    );
  });

  describe('constraints behave the same on both', () => {
    /** One statement run on both; `?` placeholders, written $1, $2, … for PostgreSQL. */
    interface Sample {
      what: string;
      sql: string;
      params?: unknown[];
      /** 'ok', 'refused' (a constraint), or the rows a query returns. */
      expect: 'ok' | 'refused' | unknown[];
    }
    const hash = (n: number) => Buffer.alloc(32, n);
    const samples: Sample[] = [
      {
        what: 'a project',
        sql: "INSERT INTO projects (id, name, plan, created_at) VALUES ('p.1', 'One', 'free', 1)",
        expect: 'ok',
      },
      {
        what: 'the policy generation moved once per changed row',
        sql: 'SELECT n FROM policy_generation',
        expect: [{ n: 1 }],
      },
      {
        what: 'a live key',
        sql: "INSERT INTO api_keys (id, project_id, mode, key_hash, hint, created_at) VALUES ('k.1', 'p.1', 'live', ?, 'h', 1)",
        params: [hash(1)],
        expect: 'ok',
      },
      {
        what: 'a key of a mode api_keys.mode does not allow (CHECK)',
        sql: "INSERT INTO api_keys (id, project_id, mode, key_hash, hint, created_at) VALUES ('k.2', 'p.1', 'admin', ?, 'h', 1)",
        params: [hash(2)],
        expect: 'refused',
      },
      {
        what: 'a second key with the same hash (UNIQUE)',
        sql: "INSERT INTO api_keys (id, project_id, mode, key_hash, hint, created_at) VALUES ('k.3', 'p.1', 'test', ?, 'h', 1)",
        params: [hash(1)],
        expect: 'refused',
      },
      {
        what: 'a key of a project that does not exist (foreign key)',
        sql: "INSERT INTO api_keys (id, project_id, mode, key_hash, hint, created_at) VALUES ('k.4', 'p.none', 'test', ?, 'h', 1)",
        params: [hash(4)],
        expect: 'refused',
      },
      {
        what: 'a key found by its hash',
        sql: 'SELECT id FROM api_keys WHERE key_hash = ?',
        params: [hash(1)],
        expect: [{ id: 'k.1' }],
      },
      {
        what: 'a suppression',
        sql: "INSERT INTO suppressions (project_id, email, reason, created_at) VALUES ('p.1', 'Ann@Example.org', 'manual', 1)",
        expect: 'ok',
      },
      {
        what: 'the same address in other case (NOCASE primary key)',
        sql: "INSERT INTO suppressions (project_id, email, reason, created_at) VALUES ('p.1', 'ann@example.ORG', 'manual', 1)",
        expect: 'refused',
      },
      {
        what: 'found in any case, with = and with LIKE',
        sql: "SELECT email FROM suppressions WHERE email = 'ANN@EXAMPLE.ORG' AND email LIKE 'ann@%'",
        expect: [{ email: 'Ann@Example.org' }],
      },
      {
        what: 'a delivered recipient (the CHECK migration 4 widened)',
        sql: "INSERT INTO recipient_outcomes (message_id, email, status, created_at) VALUES ('m.1', 'a@x.org', 'delivered', 1)",
        expect: 'ok',
      },
      {
        what: 'a recipient status no CHECK allows',
        sql: "INSERT INTO recipient_outcomes (message_id, email, status, created_at) VALUES ('m.1', 'b@x.org', 'opened', 1)",
        expect: 'refused',
      },
      {
        what: 'a DKIM key',
        sql: "INSERT INTO dkim_keys (id, project_id, domain, selector, algorithm, private_key, public_key, created_at) VALUES ('d.1', 'p.1', 'x.org', 's1', 'rsa-sha256', 'k', 'k', 1)",
        expect: 'ok',
      },
      {
        what: 'a second active key for the domain (partial UNIQUE index)',
        sql: "INSERT INTO dkim_keys (id, project_id, domain, selector, algorithm, private_key, public_key, created_at) VALUES ('d.2', 'p.1', 'x.org', 's2', 'rsa-sha256', 'k', 'k', 1)",
        expect: 'refused',
      },
      {
        what: 'the first key removed',
        sql: "UPDATE dkim_keys SET removed_at = 2 WHERE id = 'd.1'",
        expect: 'ok',
      },
      {
        what: 'then a new active key for the domain',
        sql: "INSERT INTO dkim_keys (id, project_id, domain, selector, algorithm, private_key, public_key, created_at) VALUES ('d.2', 'p.1', 'x.org', 's2', 'ed25519-sha256', 'k', 'k', 1)",
        expect: 'ok',
      },
      {
        what: 'the generation after four more policy rows changed',
        sql: 'SELECT n FROM policy_generation',
        expect: [{ n: 5 }],
      },
      {
        what: 'a second webhook cursor row (CHECK id = 1)',
        sql: 'INSERT INTO webhook_cursor (id, event_seq) VALUES (2, 0)',
        expect: 'refused',
      },
      {
        what: 'events numbered by the table',
        sql: "INSERT INTO events (project_id, type, created_at, data) VALUES ('p.1', 'a', 1, '{}'), ('p.1', 'b', 1, '{}')",
        expect: 'ok',
      },
      {
        what: 'in insertion order',
        sql: 'SELECT seq, type FROM events ORDER BY seq',
        expect: [
          { seq: 1, type: 'a' },
          { seq: 2, type: 'b' },
        ],
      },
      {
        what: 'an operator',
        sql: "INSERT INTO operators (id, email, role, password_hash, created_at, password_changed_at) VALUES ('o.1', 'Op@x.org', 'owner', 'h', 1, 1)",
        expect: 'ok',
      },
      {
        what: 'another with the same email in other case (NOCASE UNIQUE)',
        sql: "INSERT INTO operators (id, email, role, password_hash, created_at, password_changed_at) VALUES ('o.2', 'op@X.org', 'member', 'h', 1, 1)",
        expect: 'refused',
      },
      {
        what: 'a session, removed with its operator (ON DELETE CASCADE)',
        sql: "INSERT INTO operator_sessions (id_hash, operator_id, created_at, last_seen_at) VALUES (?, 'o.1', 1, 1)",
        params: [hash(9)],
        expect: 'ok',
      },
      { what: 'the operator deleted', sql: "DELETE FROM operators WHERE id = 'o.1'", expect: 'ok' },
      {
        what: 'its sessions gone',
        sql: 'SELECT count(*) AS n FROM operator_sessions',
        expect: [{ n: 0 }],
      },
      {
        what: 'a rate window',
        sql: "INSERT INTO rate_windows (limiter, max_events, window_ms, key, filled, next_slot, expires_at) VALUES ('send', 10, 60000, 'k.1', 1, 0, 60001)",
        expect: 'ok',
      },
      {
        what: 'a second window of the same limiter, configuration and key (UNIQUE)',
        sql: "INSERT INTO rate_windows (limiter, max_events, window_ms, key, filled, next_slot, expires_at) VALUES ('send', 10, 60000, 'k.1', 1, 0, 60001)",
        expect: 'refused',
      },
      {
        what: 'the same key under another limit: a window of its own',
        sql: "INSERT INTO rate_windows (limiter, max_events, window_ms, key, filled, next_slot, expires_at) VALUES ('send', 20, 60000, 'k.1', 1, 0, 60001)",
        expect: 'ok',
      },
      // Numbered by the table, in order (a refused insert may leave a gap on PostgreSQL, not on SQLite).
      {
        what: 'windows numbered by the table',
        sql: 'SELECT max_events FROM rate_windows ORDER BY id',
        expect: [{ max_events: 10 }, { max_events: 20 }],
      },
      {
        what: 'a slot of a window',
        sql: 'INSERT INTO rate_window_slots (window_id, slot, at) VALUES (1, 0, 1)',
        expect: 'ok',
      },
      {
        what: 'the same slot again (PRIMARY KEY)',
        sql: 'INSERT INTO rate_window_slots (window_id, slot, at) VALUES (1, 0, 2)',
        expect: 'refused',
      },
      {
        what: 'a viewer key that is not 32 bytes (CHECK)',
        sql: 'INSERT INTO viewer_key (id, secret, created_at) VALUES (1, ?, 1)',
        params: [Buffer.alloc(16, 7)],
        expect: 'refused',
      },
      {
        what: 'the viewer key',
        sql: 'INSERT INTO viewer_key (id, secret, created_at) VALUES (1, ?, 1)',
        params: [hash(7)],
        expect: 'ok',
      },
      {
        what: 'a second viewer key row (CHECK id = 1)',
        sql: 'INSERT INTO viewer_key (id, secret, created_at) VALUES (2, ?, 2)',
        params: [hash(8)],
        expect: 'refused',
      },
      {
        what: 'another key offered once one is stored: nothing written (ON CONFLICT DO NOTHING)',
        sql: 'INSERT INTO viewer_key (id, secret, created_at) VALUES (1, ?, 2) ON CONFLICT DO NOTHING',
        params: [hash(8)],
        expect: 'ok',
      },
      {
        what: 'the first key kept',
        sql: 'SELECT secret, created_at FROM viewer_key',
        expect: [{ secret: hash(7), created_at: 1 }],
      },
    ];

    let sampleDb: FreshDatabase;
    let client: pg.Client;
    let db: Db;
    before(async () => {
      sampleDb = await freshDatabase(server.url);
      const pool = testPool(sampleDb.url, 1);
      await migratePostgres(pool, silentLogger()).finally(() => pool.end());
      client = new pg.Client({ connectionString: sampleDb.url });
      await client.connect();
      // BIGINT and count(*) as numbers, as SQLite returns them (a later slice sets this for the store).
      pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => Number(v));
      db = openDatabase(stateDir(), silentLogger());
    });
    after(async () => {
      db?.close();
      await client?.end();
      await sampleDb?.drop();
    });

    test('the same statements are accepted, refused and answered alike', async () => {
      for (const sample of samples) {
        let n = 0;
        const pgSql = sample.sql.replace(/\?/g, () => `$${++n}`);
        const params = sample.params ?? [];
        const onSqlite = (() => {
          try {
            const stmt = db.prepare(sample.sql);
            if (stmt.reader) return stmt.all(...params);
            stmt.run(...params);
            return 'ok';
          } catch (err) {
            return /constraint/i.test((err as Error).message)
              ? 'refused'
              : `error: ${(err as Error).message}`;
          }
        })();
        const onPostgres = await client.query(pgSql, params).then(
          (r) => (r.command === 'SELECT' ? r.rows : 'ok'),
          (err: Error & { code?: string }) =>
            err.code?.startsWith('23') ? 'refused' : `error: ${err.message}`,
        );
        assert.deepEqual(onSqlite, sample.expect, `SQLite: ${sample.what}`);
        assert.deepEqual(onPostgres, sample.expect, `PostgreSQL: ${sample.what}`);
      }
    });
  });
});
