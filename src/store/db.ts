import path from 'node:path';
import Database from 'better-sqlite3';
import type { Logger } from '../log.js';
import { ensurePrivateDirectory, ensurePrivateFile } from '../platform/privateFiles.js';
import { migrations } from './migrations.js';

export type Db = Database.Database;

/** `full`: fsynced before each commit returns (what a 202 promises); `at-least-once`: synchronous=NORMAL, for work a power loss only repeats. */
export type Durability = 'full' | 'at-least-once';

/** WAL; busy_timeout lets the CLI and the server share the file. Files made private before SQLite creates anything (secrets in clear). */
export function openDatabase(
  stateDir: string,
  logger: Logger,
  opts: { migrate?: boolean; durability?: Durability } = {},
): Db {
  const file = path.join(stateDir, 'postern.db');
  ensurePrivateDirectory(stateDir, logger);
  ensurePrivateFile(file, { create: true });
  for (const companion of ['-wal', '-shm', '-journal'])
    ensurePrivateFile(file + companion, { create: false });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  setDurability(db, opts.durability ?? 'full');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 10000');
  if (opts.migrate !== false) migrate(db, logger);
  return db;
}

export function setDurability(db: Db, durability: Durability): void {
  db.pragma(durability === 'at-least-once' ? 'synchronous = NORMAL' : 'synchronous = FULL');
}

function migrate(db: Db, logger: Logger): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
  );
  const applied = new Set(
    db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[],
  );
  for (const m of migrations) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      // Re-check inside the write lock: the CLI and the server may start together.
      if (db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version)) return;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        m.version,
        m.name,
        Date.now(),
      );
      logger.info({ version: m.version, name: m.name }, 'migration applied');
    }).immediate();
  }
}

const statementCache = new WeakMap<Db, Map<string, Database.Statement>>();

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
