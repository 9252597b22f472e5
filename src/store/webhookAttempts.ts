import type { Queries } from './queries.js';

export interface WebhookAttemptRow {
  seq: number;
  delivery_id: string;
  endpoint_id: string;
  type: string;
  attempt: number;
  attempted_at: number;
  ok: number;
  status_code: number | null;
  duration_ms: number | null;
  error: string | null;
  /** Up to 1 KiB; null when none came (before migration 17: none kept). */
  answer?: string | null;
}

export async function insertWebhookAttempt(
  q: Queries,
  row: Omit<WebhookAttemptRow, 'seq'>,
): Promise<void> {
  await q.run(
    `INSERT INTO webhook_attempts (delivery_id, endpoint_id, type, attempt, attempted_at, ok, status_code, duration_ms, error, answer)
     VALUES (@delivery_id, @endpoint_id, @type, @attempt, @attempted_at, @ok, @status_code, @duration_ms, @error, @answer)`,
    { ...row, answer: row.answer ?? null },
  );
}

/** By start (a slow attempt is written after a later quick one); `before` continues a page. */
export async function listWebhookAttempts(
  q: Queries,
  endpointId: string,
  before: { at: number; seq: number } | null,
  limit: number,
): Promise<WebhookAttemptRow[]> {
  return q.all<WebhookAttemptRow>(
    `SELECT * FROM webhook_attempts WHERE endpoint_id = @endpoint
       AND (CAST(@beforeAt AS BIGINT) IS NULL OR attempted_at < @beforeAt OR (attempted_at = @beforeAt AND seq < @beforeSeq))
     ORDER BY attempted_at DESC, seq DESC LIMIT @limit`,
    { endpoint: endpointId, beforeAt: before?.at ?? null, beforeSeq: before?.seq ?? null, limit },
  );
}

export async function deliveryAttempts(
  q: Queries,
  endpointId: string,
  deliveryId: string,
): Promise<WebhookAttemptRow[]> {
  return q.all<WebhookAttemptRow>(
    'SELECT * FROM webhook_attempts WHERE endpoint_id = ? AND delivery_id = ? ORDER BY attempted_at, seq',
    endpointId,
    deliveryId,
  );
}

export async function pruneWebhookAttempts(
  q: Queries,
  before: number,
  limit: number,
): Promise<number> {
  return q.run(
    'DELETE FROM webhook_attempts WHERE seq IN (SELECT seq FROM webhook_attempts WHERE attempted_at < ? ORDER BY attempted_at LIMIT ?)',
    before,
    limit,
  );
}
