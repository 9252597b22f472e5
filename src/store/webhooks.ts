import { getValue, inJsonArray, type Queries } from './queries.js';

/** Secrets are stored in clear: they must sign. */
export interface WebhookEndpointRow {
  id: string;
  project_id: string;
  url: string;
  /** JSON array of event types; null: every type. */
  event_types: string | null;
  secret: string;
  /** Still signing until `previous_secret_expires_at`. */
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  /** Only events with a larger `events.seq` are delivered (none from before registration). */
  from_seq: number;
  created_at: number;
  disabled_at: number | null;
  disabled_reason: string | null;
  failing_since: number | null;
  last_success_at: number | null;
  last_failure_at: number | null;
  removed_at: number | null;
}

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

export async function insertWebhookEndpoint(q: Queries, row: Pick<WebhookEndpointRow, 'id' | 'project_id' | 'url' | 'event_types' | 'secret' | 'created_at'>): Promise<WebhookEndpointRow> {
  // In one write transaction: every event committed after this one has a larger seq.
  return q.transaction(async (tx) => {
    await tx.run(
      `INSERT INTO webhook_endpoints (id, project_id, url, event_types, secret, from_seq, created_at)
         VALUES (@id, @project_id, @url, @event_types, @secret, (SELECT COALESCE(MAX(seq), 0) FROM events), @created_at)`,
      row,
    );
    return (await getWebhookEndpoint(tx, row.id))!;
  });
}

export async function getWebhookEndpoint(q: Queries, id: string): Promise<WebhookEndpointRow | undefined> {
  return q.get<WebhookEndpointRow>('SELECT * FROM webhook_endpoints WHERE id = ? AND removed_at IS NULL', id);
}

export async function listWebhookEndpoints(q: Queries, projectId: string): Promise<WebhookEndpointRow[]> {
  return q.all<WebhookEndpointRow>('SELECT * FROM webhook_endpoints WHERE project_id = ? AND removed_at IS NULL ORDER BY created_at, id', projectId);
}

export async function registeredWebhookEndpoints(q: Queries): Promise<WebhookEndpointRow[]> {
  return q.all<WebhookEndpointRow>('SELECT * FROM webhook_endpoints WHERE removed_at IS NULL');
}

export async function removeWebhookEndpoint(q: Queries, id: string, now: number): Promise<{ removed: boolean; cancelled: number }> {
  return q.transaction(async (tx) => {
    const removed = (await tx.run('UPDATE webhook_endpoints SET removed_at = ? WHERE id = ? AND removed_at IS NULL', now, id)) > 0;
    if (!removed) return { removed, cancelled: 0 };
    const cancelled = await tx.run(
      "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = 'endpoint removed', completed_at = ? WHERE endpoint_id = ? AND status = 'pending'",
      now,
      id,
    );
    return { removed, cancelled };
  });
}

/** The old secret keeps signing (second `v1`) until `previousExpiresAt`. */
export async function rotateWebhookSecret(q: Queries, id: string, secret: string, previousExpiresAt: number | null): Promise<boolean> {
  return (
    (await q.run(
      `UPDATE webhook_endpoints
          SET previous_secret = CASE WHEN CAST(@expires AS BIGINT) IS NULL THEN NULL ELSE secret END,
              previous_secret_expires_at = @expires,
              secret = @secret
        WHERE id = @id AND removed_at IS NULL`,
      { id, secret, expires: previousExpiresAt },
    )) > 0
  );
}

/** Its failure run starts over and every pending delivery is due now; how many, or null when there is no such endpoint. */
export async function enableWebhookEndpoint(q: Queries, id: string, now: number): Promise<number | null> {
  return q.transaction(async (tx) => {
    const found = (await tx.run('UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL WHERE id = ? AND removed_at IS NULL', id)) > 0;
    if (!found) return null;
    await tx.run("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE endpoint_id = ? AND status = 'pending' AND next_attempt_at > ?", now, id, now);
    return (await getValue<number>(tx, "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending'", id))!;
  });
}

export async function deliveryCounts(q: Queries, endpointId: string): Promise<{ pending: number; failed: number }> {
  const pending = (await getValue<number>(q, "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending'", endpointId))!;
  const failed = (await getValue<number>(q, "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'failed'", endpointId))!;
  return { pending, failed };
}

export async function webhookCursor(q: Queries): Promise<number> {
  return (await getValue<number>(q, 'SELECT event_seq FROM webhook_cursor WHERE id = 1'))!;
}

export async function setWebhookCursor(q: Queries, seq: number): Promise<void> {
  await q.run('UPDATE webhook_cursor SET event_seq = ? WHERE id = 1', seq);
}

export interface OutboxEventHead {
  seq: number;
  project_id: string;
  type: string;
}

export async function eventsAfter(q: Queries, afterSeq: number, limit: number): Promise<OutboxEventHead[]> {
  return q.all<OutboxEventHead>('SELECT seq, project_id, type FROM events WHERE seq > ? ORDER BY seq LIMIT ?', afterSeq, limit);
}

export async function latestEventSeq(q: Queries): Promise<number> {
  return (await getValue<number>(q, 'SELECT COALESCE(MAX(seq), 0) FROM events'))!;
}

export async function insertWebhookDelivery(
  q: Queries,
  row: Pick<WebhookDeliveryRow, 'id' | 'endpoint_id' | 'event_seq' | 'type' | 'status' | 'attempts' | 'next_attempt_at' | 'created_at' | 'last_attempt_at' | 'last_status' | 'last_error' | 'completed_at' | 'body'>,
): Promise<void> {
  await q.run(
    `INSERT INTO webhook_deliveries (id, endpoint_id, event_seq, type, status, attempts, next_attempt_at, created_at, last_attempt_at, last_status, last_error, completed_at, body)
     VALUES (@id, @endpoint_id, @event_seq, @type, @status, @attempts, @next_attempt_at, @created_at, @last_attempt_at, @last_status, @last_error, @completed_at, @body)`,
    { ...row, body: row.body ?? null },
  );
}

export function newPendingDelivery(id: string, endpointId: string, event: OutboxEventHead, now: number): Parameters<typeof insertWebhookDelivery>[1] {
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

export async function hasDueDelivery(q: Queries, endpointId: string, now: number): Promise<boolean> {
  return (await q.get("SELECT 1 FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending' AND next_attempt_at <= ? LIMIT 1", endpointId, now)) !== undefined;
}

export type ClaimedDelivery = Pick<WebhookDeliveryRow, 'seq' | 'id' | 'endpoint_id' | 'event_seq' | 'type' | 'attempts'>;

/** Claimed by moving the due time to the lease's end: a crash makes them due again then (at-least-once). */
export async function claimDueDeliveries(q: Queries, endpointId: string, now: number, leaseUntil: number, limit: number): Promise<ClaimedDelivery[]> {
  return q.all<ClaimedDelivery>(
    `UPDATE webhook_deliveries SET next_attempt_at = @lease
      WHERE seq IN (SELECT seq FROM webhook_deliveries
                     WHERE endpoint_id = @endpoint AND status = 'pending' AND next_attempt_at <= @now
                     ORDER BY next_attempt_at LIMIT @limit)
      RETURNING seq, id, endpoint_id, event_seq, type, attempts`,
    { endpoint: endpointId, now, lease: leaseUntil, limit },
  );
}

export interface OutboxEvent {
  type: string;
  created_at: number;
  data: string;
}

export async function outboxEvent(q: Queries, seq: number): Promise<OutboxEvent | undefined> {
  return q.get<OutboxEvent>('SELECT type, created_at, data FROM events WHERE seq = ?', seq);
}

/** One statement instead of one per delivery. Missing ones are absent. */
export async function outboxEvents(q: Queries, seqs: number[]): Promise<Map<number, OutboxEvent>> {
  const rows = await q.all<OutboxEvent & { seq: number }>(`SELECT seq, type, created_at, data FROM events WHERE ${inJsonArray(q, 'seq', '?', 'bigint')}`, JSON.stringify(seqs));
  return new Map(rows.map(({ seq, ...event }) => [seq, event]));
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

export async function recordAttemptFailed(q: Queries, a: AttemptRecord, nextAttemptAt: number | null): Promise<boolean> {
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

export async function markEndpointSuccess(q: Queries, endpointId: string, at: number): Promise<void> {
  await q.run('UPDATE webhook_endpoints SET failing_since = NULL, last_success_at = CASE WHEN last_success_at > @at THEN last_success_at ELSE @at END WHERE id = @id', { id: endpointId, at });
}

/** Disables the endpoint once its failure run has lasted `disableAfterMs`; the reason recorded then (once), else null. */
export async function markEndpointFailure(q: Queries, endpointId: string, at: number, disableAfterMs: number, reason: (failingSince: number) => string): Promise<string | null> {
  await q.run(
    'UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, @at), last_failure_at = CASE WHEN last_failure_at > @at THEN last_failure_at ELSE @at END WHERE id = @id',
    { id: endpointId, at },
  );
  const row = await q.get<{ failing_since: number; disabled_at: number | null }>('SELECT failing_since, disabled_at FROM webhook_endpoints WHERE id = ?', endpointId);
  if (!row || row.disabled_at !== null || at - row.failing_since < disableAfterMs) return null;
  const text = reason(row.failing_since);
  await q.run('UPDATE webhook_endpoints SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL', at, text, endpointId);
  return text;
}

export async function pruneWebhookDeliveries(q: Queries, before: number, limit: number): Promise<number> {
  return q.run("DELETE FROM webhook_deliveries WHERE seq IN (SELECT seq FROM webhook_deliveries WHERE status <> 'pending' AND completed_at < ? LIMIT ?)", before, limit);
}

/** The console's redeliver: one more attempt on a finished delivery's record, never back to pending. False when pending or gone. */
export async function recordRedelivery(q: Queries, id: string, a: { at: number; ok: boolean; status: number | null; error: string | null }): Promise<number | null> {
  const row = await q.get<{ attempts: number }>("SELECT attempts FROM webhook_deliveries WHERE id = ? AND status <> 'pending'", id);
  if (!row) return null;
  await q.run(
    `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = @at, last_status = @status, last_error = @error,
            status = CASE WHEN @ok = 1 THEN 'delivered' ELSE status END, completed_at = @at
      WHERE id = @id`,
    { id, at: a.at, status: a.status, error: a.error, ok: a.ok ? 1 : 0 },
  );
  return row.attempts + 1;
}

export async function getWebhookDelivery(q: Queries, id: string): Promise<WebhookDeliveryRow | undefined> {
  return q.get<WebhookDeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = ?', id);
}
