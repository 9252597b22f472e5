import { sql, type Db } from './db.js';

/** A registered webhook endpoint (migration 5). Secrets are stored in clear: they must sign. */
export interface WebhookEndpointRow {
  id: string;
  project_id: string;
  url: string;
  /** JSON array of event types; null: every type. */
  event_types: string | null;
  secret: string;
  /** The secret before the last rotation, still signing until `previous_secret_expires_at`. */
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  /** Only events with a larger `events.seq` are delivered (none from before registration). */
  from_seq: number;
  created_at: number;
  disabled_at: number | null;
  disabled_reason: string | null;
  /** First failed attempt since the last successful one; null while healthy. */
  failing_since: number | null;
  last_success_at: number | null;
  last_failure_at: number | null;
  removed_at: number | null;
}

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface WebhookDeliveryRow {
  seq: number;
  /** `we.…`: the envelope id and `X-Service-Delivery`, the same on every attempt. */
  id: string;
  endpoint_id: string;
  /** The outbox event delivered; null for `webhook.test`. */
  event_seq: number | null;
  type: string;
  status: WebhookDeliveryStatus;
  /** Attempts whose outcome is recorded (an attempt cut short by a crash does not count). */
  attempts: number;
  /** Due time while pending; a claimed delivery's is pushed out by the lease. */
  next_attempt_at: number | null;
  created_at: number;
  last_attempt_at: number | null;
  last_status: number | null;
  last_error: string | null;
  completed_at: number | null;
}

// ------------------------------------------------------------------------------------------
// Endpoints
// ------------------------------------------------------------------------------------------

export function insertWebhookEndpoint(db: Db, row: Pick<WebhookEndpointRow, 'id' | 'project_id' | 'url' | 'event_types' | 'secret' | 'created_at'>): WebhookEndpointRow {
  // In one write transaction: every event committed after this one has a larger seq.
  return db
    .transaction(() => {
      sql(
        db,
        `INSERT INTO webhook_endpoints (id, project_id, url, event_types, secret, from_seq, created_at)
         VALUES (@id, @project_id, @url, @event_types, @secret, (SELECT COALESCE(MAX(seq), 0) FROM events), @created_at)`,
      ).run(row);
      return getWebhookEndpoint(db, row.id)!;
    })
    .immediate();
}

/** A registered (not removed) endpoint. */
export function getWebhookEndpoint(db: Db, id: string): WebhookEndpointRow | undefined {
  return sql(db, 'SELECT * FROM webhook_endpoints WHERE id = ? AND removed_at IS NULL').get(id) as WebhookEndpointRow | undefined;
}

export function listWebhookEndpoints(db: Db, projectId: string): WebhookEndpointRow[] {
  return sql(db, 'SELECT * FROM webhook_endpoints WHERE project_id = ? AND removed_at IS NULL ORDER BY created_at, id').all(projectId) as WebhookEndpointRow[];
}

/** Every registered endpoint, enabled or not (the dispatcher's view; a short list). */
export function registeredWebhookEndpoints(db: Db): WebhookEndpointRow[] {
  return sql(db, 'SELECT * FROM webhook_endpoints WHERE removed_at IS NULL').all() as WebhookEndpointRow[];
}

/** Removes an endpoint; its pending deliveries end `failed` (`endpoint removed`). */
export function removeWebhookEndpoint(db: Db, id: string, now: number): { removed: boolean; cancelled: number } {
  return db
    .transaction(() => {
      const removed = sql(db, 'UPDATE webhook_endpoints SET removed_at = ? WHERE id = ? AND removed_at IS NULL').run(now, id).changes > 0;
      if (!removed) return { removed, cancelled: 0 };
      const cancelled = sql(
        db,
        "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = 'endpoint removed', completed_at = ? WHERE endpoint_id = ? AND status = 'pending'",
      ).run(now, id).changes;
      return { removed, cancelled };
    })
    .immediate();
}

/** The new secret signs from now on; the old one keeps signing (second `v1`) until `previousExpiresAt`. */
export function rotateWebhookSecret(db: Db, id: string, secret: string, previousExpiresAt: number | null): boolean {
  return (
    sql(
      db,
      `UPDATE webhook_endpoints
          SET previous_secret = CASE WHEN @expires IS NULL THEN NULL ELSE secret END,
              previous_secret_expires_at = @expires,
              secret = @secret
        WHERE id = @id AND removed_at IS NULL`,
    ).run({ id, secret, expires: previousExpiresAt }).changes > 0
  );
}

/**
 * Re-enables an endpoint: its failure run starts over and every pending delivery is due now
 * (the operator has just fixed the receiver). Returns how many deliveries resume, or null when
 * there is no such endpoint.
 */
export function enableWebhookEndpoint(db: Db, id: string, now: number): number | null {
  return db
    .transaction(() => {
      const found = sql(db, 'UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL WHERE id = ? AND removed_at IS NULL').run(id).changes > 0;
      if (!found) return null;
      sql(db, "UPDATE webhook_deliveries SET next_attempt_at = ? WHERE endpoint_id = ? AND status = 'pending' AND next_attempt_at > ?").run(now, id, now);
      return sql(db, "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending'").pluck().get(id) as number;
    })
    .immediate();
}

export function deliveryCounts(db: Db, endpointId: string): { pending: number; failed: number } {
  const pending = sql(db, "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending'").pluck().get(endpointId) as number;
  const failed = sql(db, "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'failed'").pluck().get(endpointId) as number;
  return { pending, failed };
}

// ------------------------------------------------------------------------------------------
// Fan-out: the cursor over events.seq
// ------------------------------------------------------------------------------------------

export function webhookCursor(db: Db): number {
  return sql(db, 'SELECT event_seq FROM webhook_cursor WHERE id = 1').pluck().get() as number;
}

export function setWebhookCursor(db: Db, seq: number): void {
  sql(db, 'UPDATE webhook_cursor SET event_seq = ? WHERE id = 1').run(seq);
}

export interface OutboxEventHead {
  seq: number;
  project_id: string;
  type: string;
}

/** The next events after `afterSeq`, oldest first, without their data. */
export function eventsAfter(db: Db, afterSeq: number, limit: number): OutboxEventHead[] {
  return sql(db, 'SELECT seq, project_id, type FROM events WHERE seq > ? ORDER BY seq LIMIT ?').all(afterSeq, limit) as OutboxEventHead[];
}

export function latestEventSeq(db: Db): number {
  return sql(db, 'SELECT COALESCE(MAX(seq), 0) FROM events').pluck().get() as number;
}

export function insertWebhookDelivery(
  db: Db,
  row: Pick<WebhookDeliveryRow, 'id' | 'endpoint_id' | 'event_seq' | 'type' | 'status' | 'attempts' | 'next_attempt_at' | 'created_at' | 'last_attempt_at' | 'last_status' | 'last_error' | 'completed_at'>,
): void {
  sql(
    db,
    `INSERT INTO webhook_deliveries (id, endpoint_id, event_seq, type, status, attempts, next_attempt_at, created_at, last_attempt_at, last_status, last_error, completed_at)
     VALUES (@id, @endpoint_id, @event_seq, @type, @status, @attempts, @next_attempt_at, @created_at, @last_attempt_at, @last_status, @last_error, @completed_at)`,
  ).run(row);
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

// ------------------------------------------------------------------------------------------
// Claims and outcomes
// ------------------------------------------------------------------------------------------

/** Whether the endpoint has a pending delivery due by `now` (an index probe). */
export function hasDueDelivery(db: Db, endpointId: string, now: number): boolean {
  return sql(db, "SELECT 1 FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending' AND next_attempt_at <= ? LIMIT 1").get(endpointId, now) !== undefined;
}

export type ClaimedDelivery = Pick<WebhookDeliveryRow, 'seq' | 'id' | 'endpoint_id' | 'event_seq' | 'type' | 'attempts'>;

/**
 * Claims up to `limit` due deliveries of one endpoint, oldest due first, by moving their due
 * time to the end of the lease: a crash before the outcome is recorded makes them due again
 * then (at-least-once), and nothing else claims them meanwhile.
 */
export function claimDueDeliveries(db: Db, endpointId: string, now: number, leaseUntil: number, limit: number): ClaimedDelivery[] {
  return sql(
    db,
    `UPDATE webhook_deliveries SET next_attempt_at = @lease
      WHERE seq IN (SELECT seq FROM webhook_deliveries
                     WHERE endpoint_id = @endpoint AND status = 'pending' AND next_attempt_at <= @now
                     ORDER BY next_attempt_at LIMIT @limit)
      RETURNING seq, id, endpoint_id, event_seq, type, attempts`,
  ).all({ endpoint: endpointId, now, lease: leaseUntil, limit }) as ClaimedDelivery[];
}

export interface OutboxEvent {
  type: string;
  created_at: number;
  data: string;
}

export function outboxEvent(db: Db, seq: number): OutboxEvent | undefined {
  return sql(db, 'SELECT type, created_at, data FROM events WHERE seq = ?').get(seq) as OutboxEvent | undefined;
}

/** Several events by seq in one read (one statement instead of one per delivery). Missing ones are absent. */
export function outboxEvents(db: Db, seqs: number[]): Map<number, OutboxEvent> {
  const rows = sql(db, 'SELECT seq, type, created_at, data FROM events WHERE seq IN (SELECT value FROM json_each(?))').all(JSON.stringify(seqs)) as (OutboxEvent & { seq: number })[];
  return new Map(rows.map(({ seq, ...event }) => [seq, event]));
}

export interface AttemptRecord {
  seq: number;
  at: number;
  status: number | null;
  error: string | null;
}

export function recordDelivered(db: Db, a: AttemptRecord): boolean {
  return (
    sql(
      db,
      `UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, next_attempt_at = NULL, last_attempt_at = @at,
              last_status = @status, last_error = NULL, completed_at = @at
        WHERE seq = @seq AND status = 'pending'`,
    ).run(a).changes > 0
  );
}

/** A failed attempt: due again at `nextAttemptAt`, or, with null, failed for good. */
export function recordAttemptFailed(db: Db, a: AttemptRecord, nextAttemptAt: number | null): boolean {
  return (
    sql(
      db,
      `UPDATE webhook_deliveries
          SET status = CASE WHEN @next IS NULL THEN 'failed' ELSE 'pending' END,
              attempts = attempts + 1, next_attempt_at = @next, last_attempt_at = @at, last_status = @status, last_error = @error,
              completed_at = CASE WHEN @next IS NULL THEN @at ELSE NULL END
        WHERE seq = @seq AND status = 'pending'`,
    ).run({ ...a, next: nextAttemptAt }).changes > 0
  );
}

/** A delivery outcome for the endpoint's health: success clears the failure run. */
export function markEndpointSuccess(db: Db, endpointId: string, at: number): void {
  sql(db, 'UPDATE webhook_endpoints SET failing_since = NULL, last_success_at = MAX(COALESCE(last_success_at, 0), @at) WHERE id = @id').run({ id: endpointId, at });
}

/**
 * A failed attempt for the endpoint's health. When its failure run has lasted `disableAfterMs`
 * the endpoint is disabled; returns the reason recorded then (once), else null.
 */
export function markEndpointFailure(db: Db, endpointId: string, at: number, disableAfterMs: number, reason: (failingSince: number) => string): string | null {
  sql(
    db,
    'UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, @at), last_failure_at = MAX(COALESCE(last_failure_at, 0), @at) WHERE id = @id',
  ).run({ id: endpointId, at });
  const row = sql(db, 'SELECT failing_since, disabled_at FROM webhook_endpoints WHERE id = ?').get(endpointId) as { failing_since: number; disabled_at: number | null } | undefined;
  if (!row || row.disabled_at !== null || at - row.failing_since < disableAfterMs) return null;
  const text = reason(row.failing_since);
  sql(db, 'UPDATE webhook_endpoints SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL').run(at, text, endpointId);
  return text;
}

/** Deletes finished deliveries completed before `before`, at most `limit` at a time. */
export function pruneWebhookDeliveries(db: Db, before: number, limit: number): number {
  return sql(
    db,
    "DELETE FROM webhook_deliveries WHERE seq IN (SELECT seq FROM webhook_deliveries WHERE status <> 'pending' AND completed_at < ? LIMIT ?)",
  ).run(before, limit).changes;
}

export function getWebhookDelivery(db: Db, id: string): WebhookDeliveryRow | undefined {
  return sql(db, 'SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as WebhookDeliveryRow | undefined;
}
