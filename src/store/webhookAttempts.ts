import { sql, type Db } from './db.js';

/** One attempt to deliver a webhook, as an endpoint's delivery log shows it. */
export interface WebhookAttemptRow {
  seq: number;
  delivery_id: string;
  endpoint_id: string;
  type: string;
  /** 1 for the first attempt of the delivery. */
  attempt: number;
  attempted_at: number;
  ok: number;
  status_code: number | null;
  duration_ms: number | null;
  /** Why it failed, with the start of the receiver's answer (`HTTP 500: …`); null on success. */
  error: string | null;
}

export function insertWebhookAttempt(db: Db, row: Omit<WebhookAttemptRow, 'seq'>): void {
  sql(
    db,
    `INSERT INTO webhook_attempts (delivery_id, endpoint_id, type, attempt, attempted_at, ok, status_code, duration_ms, error)
     VALUES (@delivery_id, @endpoint_id, @type, @attempt, @attempted_at, @ok, @status_code, @duration_ms, @error)`,
  ).run(row);
}

/** An endpoint's attempts, newest first; `beforeSeq` continues a page. */
export function listWebhookAttempts(db: Db, endpointId: string, beforeSeq: number | null, limit: number): WebhookAttemptRow[] {
  return sql(db, 'SELECT * FROM webhook_attempts WHERE endpoint_id = @endpoint AND (@before IS NULL OR seq < @before) ORDER BY seq DESC LIMIT @limit').all({
    endpoint: endpointId,
    before: beforeSeq,
    limit,
  }) as WebhookAttemptRow[];
}

/** Attempts older than `before` go with the finished deliveries they belong to. */
export function pruneWebhookAttempts(db: Db, before: number, limit: number): number {
  return sql(db, 'DELETE FROM webhook_attempts WHERE seq IN (SELECT seq FROM webhook_attempts WHERE attempted_at < ? ORDER BY attempted_at LIMIT ?)').run(before, limit).changes;
}
