/**
 * A PostgreSQL server for tests: a private instance started from Debian's `postgresql`
 * binaries in a temp directory (installed by scripts/test-prerequisites.mjs), or, when
 * POSTERN_TEST_DATABASE_URL names a server, a fresh database on it. Whatever a test file
 * starts is stopped and removed when its process exits, even after a failed test.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { repoRoot } from './paths.js';

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

const POSTGRES_ROOT = '/usr/lib/postgresql';

/** The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl, or null. */
export function postgresBinDir(): string | null {
  if (!existsSync(POSTGRES_ROOT)) return null;
  const versions = readdirSync(POSTGRES_ROOT)
    .filter((v) => existsSync(path.join(POSTGRES_ROOT, v, 'bin', 'initdb')) && existsSync(path.join(POSTGRES_ROOT, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  return versions.length > 0 ? path.join(POSTGRES_ROOT, versions[0], 'bin') : null;
}

/** The OS user a private instance runs as: root may not run PostgreSQL, so it runs as `postgres`. */
function serverUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('running as root, but there is no postgres user to run PostgreSQL as (Debian package postgresql creates it)');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * Why PostgreSQL tests cannot run here (for `{ skip }`), or false when they can. `npm test`
 * as root installs the package first, so CI never skips them.
 */
export function postgresUnavailable(): string | false {
  if (process.env.POSTERN_TEST_DATABASE_URL) return false;
  if (postgresBinDir() === null) {
    return 'no PostgreSQL server binaries (Debian package postgresql; `npm test` installs it as root) and POSTERN_TEST_DATABASE_URL is unset';
  }
  if (process.getuid?.() === 0 && !readFileSync('/etc/passwd', 'utf8').split('\n').some((l) => l.startsWith('postgres:'))) {
    return 'running as root without a postgres user to run PostgreSQL as';
  }
  return false;
}

/** Synchronous clean-up steps, run when the test process exits however it exits. */
const exitSteps = new Set<() => void>();
let exitHooked = false;

function onProcessExit(step: () => void): void {
  exitSteps.add(step);
  if (exitHooked) return;
  exitHooked = true;
  process.on('exit', () => {
    for (const s of exitSteps) {
      try {
        s();
      } catch (err) {
        process.stderr.write(`postgres clean-up: ${(err as Error).message}\n`);
      }
    }
  });
  // A signal would end the process without 'exit' (and pg_ctl's postmaster runs in a session
  // of its own, so it would outlive us): turn it into an exit.
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]] as const) process.once(signal, () => process.exit(code));
}

/** A free TCP port on 127.0.0.1 (taken by the server a moment later; a clash is retried). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Runs one of PostgreSQL's programs, as `user` when given; throws with its output on failure. */
function runAs(user: { uid: number; gid: number } | null, program: string, args: string[]): string {
  const r = spawnSync(program, args, {
    encoding: 'utf8',
    timeout: 120_000,
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    // PostgreSQL's programs complain when they cannot read the working directory.
    cwd: '/',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' },
  });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${path.basename(program)} ${args[0] ?? ''} exited ${r.status ?? r.signal}: ${`${r.stdout}${r.stderr}`.trim()}`);
  return r.stdout;
}

/**
 * Starts a private PostgreSQL instance (or, with POSTERN_TEST_DATABASE_URL, makes a fresh
 * database on that server). The instance listens on 127.0.0.1 only, on a free port, with a
 * password (SCRAM), its socket in its own directory, fsync and synchronous commit on (the
 * tests check durability), and room for three nodes' pools.
 */
export async function startPrivatePostgres(): Promise<TestPostgres> {
  const given = process.env.POSTERN_TEST_DATABASE_URL;
  if (given) {
    const db = await freshDatabase(given);
    const dropOnExit = () => dropDatabaseSync(given, databaseOf(db.url));
    onProcessExit(dropOnExit);
    return {
      url: db.url,
      async stop() {
        exitSteps.delete(dropOnExit);
        await db.drop();
      },
    };
  }

  const bin = postgresBinDir();
  if (!bin) throw new Error(String(postgresUnavailable()));
  const user = serverUser();
  const dir = mkdtempSync(path.join(tmpdir(), 'postern-pg-'));
  const dataDir = path.join(dir, 'data');
  const password = randomBytes(18).toString('base64url');
  let started = false;
  const stopNow = () => {
    if (started) {
      // -m fast: clients are disconnected, then a clean shutdown (a checkpoint), and -w waits for it.
      try {
        runAs(user, path.join(bin, 'pg_ctl'), ['stop', '-D', dataDir, '-m', 'fast', '-w', '-t', '60']);
      } catch {
        runAs(user, path.join(bin, 'pg_ctl'), ['stop', '-D', dataDir, '-m', 'immediate', '-w', '-t', '30']);
      }
      started = false;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  onProcessExit(stopNow);
  try {
    if (user) chownSync(dir, user.uid, user.gid);
    const passwordFile = path.join(dir, 'password');
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    if (user) chownSync(passwordFile, user.uid, user.gid);
    // --no-sync: initdb's own flush of the fresh cluster buys nothing in a throw-away directory
    // (the server below runs with fsync on). Local (socket) connections are trusted: the socket
    // sits in this 0700 directory; TCP ones need the password.
    runAs(user, path.join(bin, 'initdb'), [
      '-D', dataDir, '-U', 'postgres', '--pwfile', passwordFile, '--auth-local=trust', '--auth-host=scram-sha-256',
      // The C locale: text sorts by bytes, as SQLite's BINARY collation does.
      '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions',
    ]);
    rmSync(passwordFile);
    appendFileSync(path.join(dataDir, 'postgresql.conf'), "\ninclude = 'postern-test.conf'\n");
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      writeFileSync(path.join(dataDir, 'postern-test.conf'), [
        `listen_addresses = '127.0.0.1'`,
        `port = ${port}`,
        `unix_socket_directories = '${dir}'`,
        // Durability as in production: the tests check what a commit promises.
        'fsync = on',
        'synchronous_commit = on',
        'full_page_writes = on',
        // Three nodes' pools, the tests' own connections and some spare.
        'max_connections = 120',
        // A small footprint on a machine shared with other work.
        'shared_buffers = 32MB',
        'max_wal_size = 256MB',
        '',
      ].join('\n'));
      try {
        runAs(user, path.join(bin, 'pg_ctl'), ['start', '-D', dataDir, '-l', path.join(dir, 'server.log'), '-w', '-t', '60']);
        started = true;
        break;
      } catch (err) {
        // pg_ctl -w waits for a postmaster.pid; a port taken meanwhile fails the start.
        if (attempt >= 3 || !/could not (bind|create listen)/i.test(serverLog(dir))) throw new Error(`${(err as Error).message}\n${serverLog(dir)}`);
      }
    }
  } catch (err) {
    stopNow();
    exitSteps.delete(stopNow);
    throw err;
  }
  const port = /port = (\d+)/.exec(readFileSync(path.join(dataDir, 'postern-test.conf'), 'utf8'))![1];
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    async stop() {
      stopNow();
      exitSteps.delete(stopNow);
    },
  };
}

function serverLog(dir: string): string {
  const file = path.join(dir, 'server.log');
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').slice(-10).join('\n') : '';
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
 * reports as an error: expected while it ends (pg-pool's `ending`), thrown at any other time.
 */
export function testPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', (err) => {
    if (!pool.ending) throw err;
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
  return testStore() === 'postgres' ? 'about the SQLite index or the spool (the suites run on PostgreSQL)' : false;
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
