import Database from 'better-sqlite3';
import path from 'node:path';
import type { Logger } from '../log.js';
import { ensurePrivateDirectory, ensurePrivateFile } from '../platform/privateFiles.js';
import { migrations } from './migrations.js';

export type Db = Database.Database;

/**
 * How a connection's commits reach the disk. `full`: each commit is fsynced before it returns,
 * so it survives power loss, which is what a 202 (or an acknowledged provider notification, or
 * an operator's command) promises. `at-least-once`: WAL with synchronous=NORMAL, for
 * bookkeeping whose loss in a power failure only means doing the work again (a delivery
 * attempt re-sent, a webhook re-delivered): it never corrupts the index, a killed process
 * loses nothing, and the event loop and the disk skip a flush per commit.
 */
export type Durability = 'full' | 'at-least-once';

/**
 * Opens the index in WAL mode. busy_timeout lets the CLI and the server share the file. The
 * index holds provider secrets in clear: the state directory and the database files are kept
 * private (0700 / 0600) before SQLite creates anything.
 */
export function openDatabase(stateDir: string, logger: Logger, opts: { migrate?: boolean; durability?: Durability } = {}): Db {
  const file = path.join(stateDir, 'postern.db');
  // Refusals (a shared directory, a planted link, another user's file) are ConfigErrors on state_dir.
  ensurePrivateDirectory(stateDir, logger);
  ensurePrivateFile(file, { create: true });
  for (const companion of ['-wal', '-shm', '-journal']) ensurePrivateFile(file + companion, { create: false });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  setDurability(db, opts.durability ?? 'full');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 10000');
  if (opts.migrate !== false) migrate(db, logger);
  return db;
}

/** How this connection's next commits reach the disk (see Durability). */
export function setDurability(db: Db, durability: Durability): void {
  db.pragma(durability === 'at-least-once' ? 'synchronous = NORMAL' : 'synchronous = FULL');
}

function migrate(db: Db, logger: Logger): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const applied = new Set(db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[]);
  for (const m of migrations) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      // Re-check inside the write lock: the CLI and the server may start together.
      if (db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version)) return;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
      logger.info({ version: m.version, name: m.name }, 'migration applied');
    }).immediate();
  }
}

const statementCache = new WeakMap<Db, Map<string, Database.Statement>>();

/** A prepared statement, compiled once per connection. */
export function sql(db: Db, text: string): Database.Statement {
  let cache = statementCache.get(db);
  if (!cache) {
    cache = new Map();
    statementCache.set(db, cache);
  }
  let stmt = cache.get(text);
  if (!stmt) {
    stmt = db.prepare(text);
    cache.set(text, stmt);
  }
  return stmt;
}
