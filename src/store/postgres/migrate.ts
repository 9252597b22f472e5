import type { Pool } from 'pg';
import type { Logger } from '../../log.js';
import type { Migration } from '../migrations.js';
import { postgresMigrations } from './migrations.js';

/**
 * The advisory lock every node takes to migrate (an arbitrary constant of Postern's: "PSTN"):
 * held to the end of each migration's transaction, so nodes starting together apply each
 * version once, one node at a time, and a node that finds a version applied skips it.
 */
export const MIGRATION_LOCK_KEY = 0x5053544e;

/**
 * Applies the migrations `pool`'s database lacks, in order, each in its own transaction under
 * the advisory lock, and records each in `schema_migrations` (shaped like SQLite's). A failing
 * migration rolls back alone and is thrown; the ones before it stay applied.
 */
export async function migratePostgres(
  pool: Pool,
  logger: Logger,
  migrations: readonly Migration[] = postgresMigrations,
): Promise<void> {
  for (const m of migrations) {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
        // Created under the lock: two nodes' CREATE TABLE IF NOT EXISTS can otherwise collide.
        await client.query(
          'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
        );
        const applied = await client.query('SELECT 1 FROM schema_migrations WHERE version = $1', [
          m.version,
        ]);
        if (applied.rowCount === 0) {
          await client.query(m.sql);
          await client.query(
            'INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)',
            [m.version, m.name, Date.now()],
          );
          logger.info({ version: m.version, name: m.name }, 'migration applied');
        }
        await client.query('COMMIT');
      } catch (err) {
        // A connection that cannot even roll back is not given back to the pool.
        await client.query('ROLLBACK').catch((rollbackErr: Error) => (broken = rollbackErr));
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }
}
