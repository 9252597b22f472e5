import { sql, type Db } from './db.js';

/**
 * Keys are unique per project and environment: a sandbox rehearsal must never answer for (and
 * so silently swallow) the production send that reuses its key after promotion.
 */
export function findIdempotentResponse(db: Db, projectId: string, environment: string, key: string): string | undefined {
  return sql(db, 'SELECT response FROM idempotency_keys WHERE project_id = ? AND environment = ? AND key = ?').pluck().get(projectId, environment, key) as
    | string
    | undefined;
}

export function insertIdempotencyKey(
  db: Db,
  row: { project_id: string; environment: string; key: string; message_id: string; response: string; created_at: number },
): void {
  sql(
    db,
    'INSERT INTO idempotency_keys (project_id, environment, key, message_id, response, created_at) VALUES (@project_id, @environment, @key, @message_id, @response, @created_at)',
  ).run(row);
}

/** Forgets keys older than their project's retention (the window of the contract). */
export function pruneIdempotencyKeys(db: Db, now: number, defaultRetentionDays: number): number {
  return sql(
    db,
    `DELETE FROM idempotency_keys WHERE created_at < ? - 86400000 * COALESCE(
       (SELECT retention_days FROM projects WHERE projects.id = idempotency_keys.project_id), ?)`,
  ).run(now, defaultRetentionDays).changes;
}
