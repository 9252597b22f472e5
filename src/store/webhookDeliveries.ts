import type { OutboxEventHead } from './eventOutbox.js';
import { getValue, type Queries } from './queries.js';

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface WebhookDeliveryRow {
  seq: number;
  /** The envelope id and `X-Service-Delivery`, the same on every attempt. */
  id: string;
  endpoint_id: string;
  /** null for `webhook.test`. */
  event_seq: number | null;
  type: string;
  status: WebhookDeliveryStatus;
  /** Attempts whose outcome is recorded (one cut short by a crash does not count). */
  attempts: number;
  next_attempt_at: number | null;
  created_at: number;
  last_attempt_at: number | null;
  last_status: number | null;
  last_error: string | null;
  completed_at: number | null;
  /** Set only for `webhook.test`; null: built again from its event. */
  body?: string | null;
}

export async function deliveryCounts(
  q: Queries,
  endpointId: string,
): Promise<{ pending: number; failed: number }> {
  const pending = (await getValue<number>(
    q,
    "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending'",
    endpointId,
  ))!;
  const failed = (await getValue<number>(
    q,
    "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'failed'",
    endpointId,
  ))!;
  return { pending, failed };
}

export async function insertWebhookDelivery(
  q: Queries,
  row: Pick<
    WebhookDeliveryRow,
    | 'id'
    | 'endpoint_id'
    | 'event_seq'
    | 'type'
    | 'status'
    | 'attempts'
    | 'next_attempt_at'
    | 'created_at'
    | 'last_attempt_at'
    | 'last_status'
    | 'last_error'
    | 'completed_at'
    | 'body'
  >,
): Promise<void> {
  await q.run(
    `INSERT INTO webhook_deliveries (id, endpoint_id, event_seq, type, status, attempts, next_attempt_at, created_at, last_attempt_at, last_status, last_error, completed_at, body)
     VALUES (@id, @endpoint_id, @event_seq, @type, @status, @attempts, @next_attempt_at, @created_at, @last_attempt_at, @last_status, @last_error, @completed_at, @body)`,
    { ...row, body: row.body ?? null },
  );
}

export function newPendingDelivery(
  id: string,
  endpointId: string,
  event: OutboxEventHead,
  now: number,
): Parameters<typeof insertWebhookDelivery>[1] {
  return {
    id,
    endpoint_id: endpointId,
    event_seq: event.seq,
    type: event.type,
    status: 'pending',
    attempts: 0,
    next_attempt_at: now,
    created_at: now,
    last_attempt_at: null,
    last_status: null,
    last_error: null,
    completed_at: null,
  };
}

export async function hasDueDelivery(
  q: Queries,
  endpointId: string,
  now: number,
): Promise<boolean> {
  return (
    (await q.get(
      "SELECT 1 FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending' AND next_attempt_at <= ? LIMIT 1",
      endpointId,
      now,
    )) !== undefined
  );
}

export type ClaimedDelivery = Pick<
  WebhookDeliveryRow,
  'seq' | 'id' | 'endpoint_id' | 'event_seq' | 'type' | 'attempts'
>;

/** Claimed by moving the due time to the lease's end: a crash makes them due again then (at-least-once). */
export async function claimDueDeliveries(
  q: Queries,
  endpointId: string,
  now: number,
  leaseUntil: number,
  limit: number,
): Promise<ClaimedDelivery[]> {
  return q.all<ClaimedDelivery>(
    `UPDATE webhook_deliveries SET next_attempt_at = @lease
      WHERE seq IN (SELECT seq FROM webhook_deliveries
                     WHERE endpoint_id = @endpoint AND status = 'pending' AND next_attempt_at <= @now
                     ORDER BY next_attempt_at LIMIT @limit)
      RETURNING seq, id, endpoint_id, event_seq, type, attempts`,
    { endpoint: endpointId, now, lease: leaseUntil, limit },
  );
}

export interface AttemptRecord {
  seq: number;
  at: number;
  status: number | null;
  error: string | null;
}

export async function recordDelivered(q: Queries, a: AttemptRecord): Promise<boolean> {
  return (
    (await q.run(
      `UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, next_attempt_at = NULL, last_attempt_at = @at,
              last_status = @status, last_error = NULL, completed_at = @at
        WHERE seq = @seq AND status = 'pending'`,
      { ...a },
    )) > 0
  );
}

export async function recordAttemptFailed(
  q: Queries,
  a: AttemptRecord,
  nextAttemptAt: number | null,
): Promise<boolean> {
  return (
    (await q.run(
      `UPDATE webhook_deliveries
          SET status = CASE WHEN @next IS NULL THEN 'failed' ELSE 'pending' END,
              attempts = attempts + 1, next_attempt_at = @next, last_attempt_at = @at, last_status = @status, last_error = @error,
              completed_at = CASE WHEN @next IS NULL THEN @at ELSE NULL END
        WHERE seq = @seq AND status = 'pending'`,
      { ...a, next: nextAttemptAt },
    )) > 0
  );
}

export async function pruneWebhookDeliveries(
  q: Queries,
  before: number,
  limit: number,
): Promise<number> {
  return q.run(
    "DELETE FROM webhook_deliveries WHERE seq IN (SELECT seq FROM webhook_deliveries WHERE status <> 'pending' AND completed_at < ? LIMIT ?)",
    before,
    limit,
  );
}

/** The console's redeliver: one more attempt on a finished delivery's record, never back to pending. False when pending or gone. */
export async function recordRedelivery(
  q: Queries,
  id: string,
  a: { at: number; ok: boolean; status: number | null; error: string | null },
): Promise<number | null> {
  const row = await q.get<{ attempts: number }>(
    "SELECT attempts FROM webhook_deliveries WHERE id = ? AND status <> 'pending'",
    id,
  );
  if (!row) return null;
  await q.run(
    `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = @at, last_status = @status, last_error = @error,
            status = CASE WHEN @ok = 1 THEN 'delivered' ELSE status END, completed_at = @at
      WHERE id = @id`,
    { id, at: a.at, status: a.status, error: a.error, ok: a.ok ? 1 : 0 },
  );
  return row.attempts + 1;
}

export async function getWebhookDelivery(
  q: Queries,
  id: string,
): Promise<WebhookDeliveryRow | undefined> {
  return q.get<WebhookDeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = ?', id);
}
