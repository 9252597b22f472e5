import { getValue, type Queries } from './queries.js';

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

export async function insertWebhookEndpoint(
  q: Queries,
  row: Pick<
    WebhookEndpointRow,
    'id' | 'project_id' | 'url' | 'event_types' | 'secret' | 'created_at'
  >,
): Promise<WebhookEndpointRow> {
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

export async function getWebhookEndpoint(
  q: Queries,
  id: string,
): Promise<WebhookEndpointRow | undefined> {
  return q.get<WebhookEndpointRow>(
    'SELECT * FROM webhook_endpoints WHERE id = ? AND removed_at IS NULL',
    id,
  );
}

export async function listWebhookEndpoints(
  q: Queries,
  projectId: string,
): Promise<WebhookEndpointRow[]> {
  return q.all<WebhookEndpointRow>(
    'SELECT * FROM webhook_endpoints WHERE project_id = ? AND removed_at IS NULL ORDER BY created_at, id',
    projectId,
  );
}

export async function registeredWebhookEndpoints(q: Queries): Promise<WebhookEndpointRow[]> {
  return q.all<WebhookEndpointRow>('SELECT * FROM webhook_endpoints WHERE removed_at IS NULL');
}

export async function removeWebhookEndpoint(
  q: Queries,
  id: string,
  now: number,
): Promise<{ removed: boolean; cancelled: number }> {
  return q.transaction(async (tx) => {
    const removed =
      (await tx.run(
        'UPDATE webhook_endpoints SET removed_at = ? WHERE id = ? AND removed_at IS NULL',
        now,
        id,
      )) > 0;
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
export async function rotateWebhookSecret(
  q: Queries,
  id: string,
  secret: string,
  previousExpiresAt: number | null,
): Promise<boolean> {
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
export async function enableWebhookEndpoint(
  q: Queries,
  id: string,
  now: number,
): Promise<number | null> {
  return q.transaction(async (tx) => {
    const found =
      (await tx.run(
        'UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL WHERE id = ? AND removed_at IS NULL',
        id,
      )) > 0;
    if (!found) return null;
    await tx.run(
      "UPDATE webhook_deliveries SET next_attempt_at = ? WHERE endpoint_id = ? AND status = 'pending' AND next_attempt_at > ?",
      now,
      id,
      now,
    );
    return (await getValue<number>(
      tx,
      "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending'",
      id,
    ))!;
  });
}

export async function markEndpointSuccess(
  q: Queries,
  endpointId: string,
  at: number,
): Promise<void> {
  await q.run(
    'UPDATE webhook_endpoints SET failing_since = NULL, last_success_at = CASE WHEN last_success_at > @at THEN last_success_at ELSE @at END WHERE id = @id',
    { id: endpointId, at },
  );
}

/** Disables the endpoint once its failure run has lasted `disableAfterMs`; the reason recorded then (once), else null. */
export async function markEndpointFailure(
  q: Queries,
  endpointId: string,
  at: number,
  disableAfterMs: number,
  reason: (failingSince: number) => string,
): Promise<string | null> {
  await q.run(
    'UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, @at), last_failure_at = CASE WHEN last_failure_at > @at THEN last_failure_at ELSE @at END WHERE id = @id',
    { id: endpointId, at },
  );
  const row = await q.get<{ failing_since: number; disabled_at: number | null }>(
    'SELECT failing_since, disabled_at FROM webhook_endpoints WHERE id = ?',
    endpointId,
  );
  if (!row || row.disabled_at !== null || at - row.failing_since < disableAfterMs) return null;
  const text = reason(row.failing_since);
  await q.run(
    'UPDATE webhook_endpoints SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL',
    at,
    text,
    endpointId,
  );
  return text;
}
