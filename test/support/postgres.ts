/**
 * A PostgreSQL server for tests: a private instance (test/support/privatePostgres.ts: Debian's
 * `postgresql` binaries, installed by scripts/test-prerequisites.mjs), or, when
 * POSTERN_TEST_DATABASE_URL names a server, a fresh database on it. Whatever a test file
 * starts is stopped and removed when its process exits, even after a failed test.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { repoRoot } from './paths.js';
import {
  onProcessExit,
  type PostgresInstance,
  privatePostgresUnavailable,
  startPostgresInstance,
} from './privatePostgres.js';

export interface TestPostgres {
  /** A connection URL (postgres://user:password@127.0.0.1:port/database). */
  url: string;
  /** Stops the instance and removes its directory (or drops the database made on a given server). */
  stop(): Promise<void>;
}

export interface FreshDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * Why PostgreSQL tests cannot run here (for `{ skip }`), or false when they can. `npm test`
 * as root installs the package first, so CI never skips them.
 */
export function postgresUnavailable(): string | false {
  if (process.env.POSTERN_TEST_DATABASE_URL) return false;
  const why = privatePostgresUnavailable();
  return why && `${why}; \`npm test\` installs it as root; POSTERN_TEST_DATABASE_URL is unset`;
}

/**
 * Starts a private PostgreSQL instance (or, with POSTERN_TEST_DATABASE_URL, makes a fresh
 * database on that server): durable (the tests check what a commit promises), with room for
 * three nodes' pools and a small footprint.
 */
export async function startPrivatePostgres(): Promise<TestPostgres> {
  const given = process.env.POSTERN_TEST_DATABASE_URL;
  if (given) {
    const db = await freshDatabase(given);
    const cancelDrop = onProcessExit(() => dropDatabaseSync(given, databaseOf(db.url)));
    return {
      url: db.url,
      async stop() {
        cancelDrop();
        await db.drop();
      },
    };
  }

  const instance = await startTestInstance();
  return { url: instance.url, stop: () => instance.stop() };
}

/**
 * A private instance of the test process's own, whatever POSTERN_TEST_DATABASE_URL says (a test
 * that stops and starts its server: skip with privatePostgresUnavailable()), with the settings of
 * startPrivatePostgres's.
 */
export function startTestInstance(): Promise<PostgresInstance> {
  return startPostgresInstance([
    // Three nodes' pools, the tests' own connections and some spare.
    'max_connections = 120',
    // A small footprint on a machine shared with other work.
    'shared_buffers = 32MB',
    'max_wal_size = 256MB',
  ]);
}

function databaseOf(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

const quoteIdentifier = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * A new, empty database on the server at `url` (one per test file on one instance, or one per
 * call on a given server), and a way to drop it.
 */
export async function freshDatabase(url: string): Promise<FreshDatabase> {
  const name = `postern_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${quoteIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(url, name),
    async drop() {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        // WITH (FORCE): a pool a failed test left open must not keep the database alive.
        await c.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * A pool for tests. pool.end() resolves before its connections have closed, so dropping the
 * database or stopping the server right after terminates ones still closing, which the pool
 * reports as an error: expected while it ends (pg-pool's `ending`), thrown at any other time,
 * unless the test restarts the server itself (`restarts`: its idle connections are cut then).
 */
export function testPool(url: string, max: number, opts: { restarts?: boolean } = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', (err) => {
    if (!pool.ending && !opts.restarts) throw err;
  });
  return pool;
}

/** The exit handler's drop: nothing asynchronous runs there, so a child process does it. */
function dropDatabaseSync(serverUrl: string, database: string): void {
  const script = `
    import pg from 'pg';
    const c = new pg.Client({ connectionString: process.env.SERVER_URL });
    await c.connect();
    await c.query('DROP DATABASE IF EXISTS "' + process.env.DATABASE.replaceAll('"', '""') + '" WITH (FORCE)');
    await c.end();`;
  spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: repoRoot,
    env: { ...process.env, SERVER_URL: serverUrl, DATABASE: database },
    stdio: 'ignore',
    timeout: 30_000,
  });
}

/**
 * The backend the suites run against: `POSTERN_TEST_STORE=postgres` runs the contract suites on
 * PostgreSQL (npm test does, after the SQLite run); otherwise SQLite.
 */
export function testStore(): 'sqlite' | 'postgres' {
  return process.env.POSTERN_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';
}

/** For a suite or test that is about SQLite or the spool itself: skipped when the suites run on PostgreSQL. */
export function sqliteOnly(): string | false {
  return testStore() === 'postgres'
    ? 'about the SQLite index or the spool (the suites run on PostgreSQL)'
    : false;
}

let shared: Promise<TestPostgres> | null = null;
const databases = new Map<string, Promise<FreshDatabase>>();

/** One private PostgreSQL for the whole test process, started on first use and stopped at exit. */
export function sharedPostgres(): Promise<TestPostgres> {
  shared ??= startPrivatePostgres();
  return shared;
}

/**
 * The database that stands for a state directory when the suites run on PostgreSQL: made on
 * first use (a fresh one per state directory, so suites never see each other's rows), dropped
 * with the server at exit or by `dropDatabaseFor`.
 */
export function databaseFor(stateDir: string): Promise<FreshDatabase> {
  let database = databases.get(stateDir);
  if (!database) {
    database = sharedPostgres().then((server) => freshDatabase(server.url));
    databases.set(stateDir, database);
  }
  return database;
}

export async function dropDatabaseFor(stateDir: string): Promise<void> {
  const database = databases.get(stateDir);
  if (!database) return;
  databases.delete(stateDir);
  await (await database).drop();
}
