import { getValue, type Queries } from './queries.js';

/**
 * Keys are unique per project and environment: a sandbox rehearsal must never answer for (and
 * so silently swallow) the production send that reuses its key after promotion.
 */
export async function findIdempotentResponse(
  q: Queries,
  projectId: string,
  environment: string,
  key: string,
): Promise<string | undefined> {
  return getValue<string>(
    q,
    'SELECT response FROM idempotency_keys WHERE project_id = ? AND environment = ? AND key = ?',
    projectId,
    environment,
    key,
  );
}

export async function insertIdempotencyKey(
  q: Queries,
  row: {
    project_id: string;
    environment: string;
    key: string;
    message_id: string;
    response: string;
    created_at: number;
  },
): Promise<void> {
  await q.run(
    'INSERT INTO idempotency_keys (project_id, environment, key, message_id, response, created_at) VALUES (@project_id, @environment, @key, @message_id, @response, @created_at)',
    row,
  );
}

/** Forgets keys older than their project's retention (the window of the contract). */
export async function pruneIdempotencyKeys(
  q: Queries,
  now: number,
  defaultRetentionDays: number,
): Promise<number> {
  return q.run(
    // BIGINT: on PostgreSQL 86400000 * an INTEGER number of days would overflow int4 past 24 days.
    `DELETE FROM idempotency_keys WHERE created_at < CAST(? AS BIGINT) - CAST(86400000 AS BIGINT) * COALESCE(
       (SELECT retention_days FROM projects WHERE projects.id = idempotency_keys.project_id), ?)`,
    now,
    defaultRetentionDays,
  );
}
