import { sql, type Db } from './db.js';
import { LIVE_STATUSES, type MessageStatus } from './messages.js';

/** An outbox event, as the console's hourly figures and live feed read it. */
export interface ActivityEvent {
  seq: number;
  project_id: string;
  message_id: string | null;
  type: string;
  created_at: number;
}

export function eventsAfterSeq(db: Db, afterSeq: number, limit: number): ActivityEvent[] {
  return sql(db, 'SELECT seq, project_id, message_id, type, created_at FROM events WHERE seq > ? ORDER BY seq LIMIT ?').all(afterSeq, limit) as ActivityEvent[];
}

/** Where each of these messages stands now (those that still exist). */
export function messageHeads(db: Db, ids: readonly string[]): { id: string; project_id: string; environment: 'production' | 'sandbox'; status: MessageStatus }[] {
  return sql(db, 'SELECT id, project_id, environment, status FROM messages WHERE id IN (SELECT value FROM json_each(?))').all(JSON.stringify(ids)) as {
    id: string;
    project_id: string;
    environment: 'production' | 'sandbox';
    status: MessageStatus;
  }[];
}

/** A hand-off attempt, for provider health. */
export interface ActivityAttempt {
  seq: number;
  provider_account_id: string | null;
  provider_slug: string | null;
  finished_at: number;
  outcome: 'sent' | 'temporary' | 'account' | 'permanent';
  reply: string | null;
}

export function attemptsAfterSeq(db: Db, afterSeq: number, limit: number): ActivityAttempt[] {
  return sql(db, 'SELECT seq, provider_account_id, provider_slug, finished_at, outcome, reply FROM attempts WHERE seq > ? ORDER BY seq LIMIT ?').all(
    afterSeq,
    limit,
  ) as ActivityAttempt[];
}

/**
 * The last seq of `table` recorded before `time` (0 when none): a binary search over the seq
 * (its rowid), since the time column has no index of its own and rows are written in time order.
 */
export function lastSeqBefore(db: Db, table: 'events' | 'attempts', time: number): number {
  const column = table === 'events' ? 'created_at' : 'finished_at';
  const bounds = sql(db, `SELECT MIN(seq) AS lo, MAX(seq) AS hi FROM ${table}`).get() as { lo: number | null; hi: number | null };
  if (bounds.lo === null || bounds.hi === null) return 0;
  const timeAt = sql(db, `SELECT seq, ${column} AS t FROM ${table} WHERE seq >= ? ORDER BY seq LIMIT 1`);
  // Invariant: rows at or below `lo - 1` are before `time`; the answer lies in [lo - 1, hi].
  let lo = bounds.lo;
  let hi = bounds.hi + 1;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const row = timeAt.get(mid) as { seq: number; t: number } | undefined;
    if (row && row.t < time) lo = row.seq + 1;
    else hi = mid;
  }
  return lo - 1;
}

export function latestSeq(db: Db, table: 'events' | 'attempts'): number {
  return (sql(db, `SELECT COALESCE(MAX(seq), 0) FROM ${table}`).pluck().get() as number) ?? 0;
}

export interface QueueCount {
  project_id: string;
  status: MessageStatus;
  count: number;
}

/** Messages in a live state, by project and status (the status index holds them). */
export function liveMessageCounts(db: Db): QueueCount[] {
  return sql(db, `SELECT project_id, status, COUNT(*) AS count FROM messages WHERE status IN (${LIVE_STATUSES.map((s) => `'${s}'`).join(', ')}) GROUP BY project_id, status`).all() as QueueCount[];
}

export interface QueuedHead {
  id: string;
  project_id: string;
  created_at: number;
  next_attempt_at: number | null;
  attempts: number;
}

/**
 * The oldest message still waiting to be handed off (queued: due, or on the retry ladder), in
 * the given projects (null: any). Walks only the queued rows of the status index.
 */
export function oldestQueuedMessage(db: Db, projectIds: readonly string[] | null): QueuedHead | undefined {
  const rows = sql(
    db,
    "SELECT id, project_id, created_at, next_attempt_at, attempts FROM messages INDEXED BY messages_status_due WHERE status = 'queued' AND (@all OR project_id IN (SELECT value FROM json_each(@projects))) ORDER BY created_at LIMIT 1",
  ).all({ all: projectIds === null ? 1 : 0, projects: JSON.stringify(projectIds ?? []) }) as QueuedHead[];
  return rows[0];
}

/** Stored MIME files and their bytes, of the messages with rowid in (fromRowid, toRowid]: a bounded step of a scan. */
export function storedFilesBetween(db: Db, fromRowid: number, toRowid: number): { files: number; bytes: number } {
  return sql(db, 'SELECT COUNT(*) AS files, COALESCE(SUM(size_bytes), 0) AS bytes FROM messages WHERE rowid > ? AND rowid <= ?').get(fromRowid, toRowid) as { files: number; bytes: number };
}

/** Messages by status, every status (finished ones too): a walk of the status index, no table read. */
export function messageCountsByStatus(db: Db): { status: string; count: number }[] {
  return sql(db, 'SELECT status, COUNT(*) AS count FROM messages INDEXED BY messages_status_due GROUP BY status').all() as { status: string; count: number }[];
}

/** Webhook deliveries waiting (pending: due, or on the retry ladder): a count over the partial index of pending rows. */
export function pendingWebhookDeliveries(db: Db): number {
  return sql(db, "SELECT COUNT(*) FROM webhook_deliveries INDEXED BY webhook_deliveries_due WHERE status = 'pending'").pluck().get() as number;
}

export function maxMessageRowid(db: Db): number {
  return (sql(db, 'SELECT COALESCE(MAX(rowid), 0) FROM messages').pluck().get() as number) ?? 0;
}

/** Webhook endpoints in trouble: disabled, or failing since some time (every attempt failed since). */
export function troubledWebhookEndpoints(db: Db): { id: string; project_id: string; url: string; disabled_at: number | null; disabled_reason: string | null; failing_since: number | null; last_failure_at: number | null }[] {
  return sql(
    db,
    'SELECT id, project_id, url, disabled_at, disabled_reason, failing_since, last_failure_at FROM webhook_endpoints WHERE removed_at IS NULL AND (disabled_at IS NOT NULL OR failing_since IS NOT NULL) ORDER BY created_at',
  ).all() as ReturnType<typeof troubledWebhookEndpoints>;
}

/** Every attached provider account, without its secrets. */
export function attachedProviderAccounts(db: Db): { id: string; project_id: string; slug: string; priority: number }[] {
  return sql(db, 'SELECT id, project_id, slug, priority FROM provider_accounts WHERE detached_at IS NULL ORDER BY project_id, priority, created_at').all() as {
    id: string;
    project_id: string;
    slug: string;
    priority: number;
  }[];
}

/** The age buckets of `queue summary` (minutes; qshape's): 0–5, 5–10, 10–20, 20–40, 40–80, 80–160, over 160. */
export const AGE_BUCKET_MINUTES = [5, 10, 20, 40, 80, 160] as const;

/** Live messages by status and age bucket (index into AGE_BUCKET_MINUTES; its length: older than the last). */
export function liveMessageAges(db: Db, now: number): { status: MessageStatus; bucket: number; count: number }[] {
  const cases = AGE_BUCKET_MINUTES.map((m, i) => `WHEN @now - created_at < ${m * 60_000} THEN ${i}`).join(' ');
  return sql(
    db,
    `SELECT status, CASE ${cases} ELSE ${AGE_BUCKET_MINUTES.length} END AS bucket, COUNT(*) AS count FROM messages WHERE status IN (${LIVE_STATUSES.map((s) => `'${s}'`).join(', ')}) GROUP BY status, bucket`,
  ).all({ now }) as { status: MessageStatus; bucket: number; count: number }[];
}

/** Messages handed to a provider, by the provider that took them (or last refused them) and status. */
export function messagesByProvider(db: Db): { provider: string; status: MessageStatus; count: number }[] {
  return sql(db, 'SELECT provider_slug AS provider, status, COUNT(*) AS count FROM messages WHERE provider_slug IS NOT NULL GROUP BY provider_slug, status ORDER BY provider_slug').all() as {
    provider: string;
    status: MessageStatus;
    count: number;
  }[];
}
