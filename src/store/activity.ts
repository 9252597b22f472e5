import { LIVE_STATUSES, type MessageStatus } from '../contract/messageStates.js';
import { statusIn } from './messages.js';
import { getValue, indexedBy, inJsonArray, type Queries } from './queries.js';

/** An outbox event, as the console's hourly figures and live feed read it. */
export interface ActivityEvent {
  seq: number;
  project_id: string;
  message_id: string | null;
  type: string;
  created_at: number;
}

export async function eventsAfterSeq(
  q: Queries,
  afterSeq: number,
  limit: number,
): Promise<ActivityEvent[]> {
  return q.all<ActivityEvent>(
    'SELECT seq, project_id, message_id, type, created_at FROM events WHERE seq > ? ORDER BY seq LIMIT ?',
    afterSeq,
    limit,
  );
}

/** These events, those that exist (by seq, in any order). */
export async function eventsAtSeqs(q: Queries, seqs: readonly number[]): Promise<ActivityEvent[]> {
  return q.all<ActivityEvent>(
    `SELECT seq, project_id, message_id, type, created_at FROM events WHERE ${inJsonArray(q, 'seq', '?', 'bigint')}`,
    JSON.stringify(seqs),
  );
}

/** Where each of these messages stands now (those that still exist). */
export async function messageHeads(
  q: Queries,
  ids: readonly string[],
): Promise<
  { id: string; project_id: string; environment: 'production' | 'sandbox'; status: MessageStatus }[]
> {
  return q.all<{
    id: string;
    project_id: string;
    environment: 'production' | 'sandbox';
    status: MessageStatus;
  }>(
    `SELECT id, project_id, environment, status FROM messages WHERE ${inJsonArray(q, 'id', '?')}`,
    JSON.stringify(ids),
  );
}

/** A hand-off attempt, for provider health and the hourly deferrals. */
export interface ActivityAttempt {
  seq: number;
  /** The project of the account it went to (null: an account no longer known). */
  project_id: string | null;
  provider_account_id: string | null;
  provider_slug: string | null;
  finished_at: number;
  outcome: 'sent' | 'temporary' | 'account' | 'permanent';
  reply: string | null;
}

// Accounts belong to a project and are detached, never deleted: the join names every attempt's project.
const ATTEMPT_COLUMNS =
  'a.seq, p.project_id, a.provider_account_id, a.provider_slug, a.finished_at, a.outcome, a.reply FROM attempts a LEFT JOIN provider_accounts p ON p.id = a.provider_account_id';

export async function attemptsAfterSeq(
  q: Queries,
  afterSeq: number,
  limit: number,
): Promise<ActivityAttempt[]> {
  return q.all<ActivityAttempt>(
    `SELECT ${ATTEMPT_COLUMNS} WHERE a.seq > ? ORDER BY a.seq LIMIT ?`,
    afterSeq,
    limit,
  );
}

/** These attempts, those that exist (by seq, in any order). */
export async function attemptsAtSeqs(
  q: Queries,
  seqs: readonly number[],
): Promise<ActivityAttempt[]> {
  return q.all<ActivityAttempt>(
    `SELECT ${ATTEMPT_COLUMNS} WHERE ${inJsonArray(q, 'a.seq', '?', 'bigint')}`,
    JSON.stringify(seqs),
  );
}

/**
 * The last seq of `table` recorded before `time` (0 when none): a binary search over the seq
 * (its rowid), since the time column has no index of its own and rows are written in time order.
 */
export async function lastSeqBefore(
  q: Queries,
  table: 'events' | 'attempts',
  time: number,
): Promise<number> {
  const column = table === 'events' ? 'created_at' : 'finished_at';
  const bounds = (await q.get<{ lo: number | null; hi: number | null }>(
    `SELECT MIN(seq) AS lo, MAX(seq) AS hi FROM ${table}`,
  ))!;
  if (bounds.lo === null || bounds.hi === null) return 0;
  const timeAt = `SELECT seq, ${column} AS t FROM ${table} WHERE seq >= ? ORDER BY seq LIMIT 1`;
  // Invariant: rows at or below `lo - 1` are before `time`; the answer lies in [lo - 1, hi].
  let lo = bounds.lo;
  let hi = bounds.hi + 1;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const row = await q.get<{ seq: number; t: number }>(timeAt, mid);
    if (row && row.t < time) lo = row.seq + 1;
    else hi = mid;
  }
  return lo - 1;
}

export async function latestSeq(q: Queries, table: 'events' | 'attempts'): Promise<number> {
  return (await getValue<number>(q, `SELECT COALESCE(MAX(seq), 0) FROM ${table}`)) ?? 0;
}

export interface QueueCount {
  project_id: string;
  status: MessageStatus;
  count: number;
}

/** Messages in a live state, by project and status (the status index holds them). */
export async function liveMessageCounts(q: Queries): Promise<QueueCount[]> {
  return q.all<QueueCount>(
    `SELECT project_id, status, COUNT(*) AS count FROM messages WHERE ${statusIn(LIVE_STATUSES)} GROUP BY project_id, status`,
  );
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
export async function oldestQueuedMessage(
  q: Queries,
  projectIds: readonly string[] | null,
): Promise<QueuedHead | undefined> {
  const head = `SELECT id, project_id, created_at, next_attempt_at, attempts FROM messages ${indexedBy(q, 'messages_status_due')} WHERE status = 'queued'`;
  if (projectIds === null) return q.get<QueuedHead>(`${head} ORDER BY created_at LIMIT 1`);
  return q.get<QueuedHead>(
    `${head} AND ${inJsonArray(q, 'project_id', '?')} ORDER BY created_at LIMIT 1`,
    JSON.stringify(projectIds),
  );
}

/** Stored MIME files and their bytes, of the messages with rowid in (fromRowid, toRowid]: a bounded step of a scan. */
export async function storedFilesBetween(
  q: Queries,
  fromRowid: number,
  toRowid: number,
): Promise<{ files: number; bytes: number }> {
  return (await q.get<{ files: number; bytes: number }>(
    'SELECT COUNT(*) AS files, COALESCE(SUM(size_bytes), 0) AS bytes FROM messages WHERE rowid > ? AND rowid <= ?',
    fromRowid,
    toRowid,
  ))!;
}

/** Messages by status, every status (finished ones too): a walk of the status index, no table read. */
export async function messageCountsByStatus(
  q: Queries,
): Promise<{ status: string; count: number }[]> {
  return q.all<{ status: string; count: number }>(
    `SELECT status, COUNT(*) AS count FROM messages ${indexedBy(q, 'messages_status_due')} GROUP BY status`,
  );
}

/** Webhook deliveries waiting (pending: due, or on the retry ladder): a count over the partial index of pending rows. */
export async function pendingWebhookDeliveries(q: Queries): Promise<number> {
  return (await getValue<number>(
    q,
    `SELECT COUNT(*) FROM webhook_deliveries ${indexedBy(q, 'webhook_deliveries_due')} WHERE status = 'pending'`,
  ))!;
}

/**
 * PostgreSQL's figures of the stored MIME, read without a scan (a count of a large messages
 * table by each node every minute would cost the shared database more than the figure is
 * worth): the bytes the bodies take in the database (message_body_chunks with its TOAST and
 * index, pg_total_relation_size: space a deleted body frees is reused, not given back) and the
 * messages its statistics count (n_live_tup, up to a few seconds behind).
 */
export async function storedBodiesByStatistics(
  q: Queries,
): Promise<{ files: number; bytes: number }> {
  return (await q.get<{ files: number; bytes: number }>(
    `SELECT COALESCE((SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = CAST('messages' AS regclass)), 0) AS files,
            pg_total_relation_size(CAST('message_body_chunks' AS regclass)) AS bytes`,
  ))!;
}

export async function maxMessageRowid(q: Queries): Promise<number> {
  return (await getValue<number>(q, 'SELECT COALESCE(MAX(rowid), 0) FROM messages')) ?? 0;
}

/** Webhook endpoints in trouble: disabled, or failing since some time (every attempt failed since). */
export interface TroubledWebhookEndpoint {
  id: string;
  project_id: string;
  url: string;
  disabled_at: number | null;
  disabled_reason: string | null;
  failing_since: number | null;
  last_failure_at: number | null;
}

export async function troubledWebhookEndpoints(q: Queries): Promise<TroubledWebhookEndpoint[]> {
  return q.all<TroubledWebhookEndpoint>(
    'SELECT id, project_id, url, disabled_at, disabled_reason, failing_since, last_failure_at FROM webhook_endpoints WHERE removed_at IS NULL AND (disabled_at IS NOT NULL OR failing_since IS NOT NULL) ORDER BY created_at',
  );
}

/** Every attached provider account, without its secrets. */
export async function attachedProviderAccounts(
  q: Queries,
): Promise<{ id: string; project_id: string; slug: string; priority: number }[]> {
  return q.all<{
    id: string;
    project_id: string;
    slug: string;
    priority: number;
  }>(
    'SELECT id, project_id, slug, priority FROM provider_accounts WHERE detached_at IS NULL ORDER BY project_id, priority, created_at',
  );
}

/** The age buckets of `queue summary` (minutes; qshape's): 0–5, 5–10, 10–20, 20–40, 40–80, 80–160, over 160. */
export const AGE_BUCKET_MINUTES = [5, 10, 20, 40, 80, 160] as const;

/** Live messages by status and age bucket (index into AGE_BUCKET_MINUTES; its length: older than the last). */
export async function liveMessageAges(
  q: Queries,
  now: number,
): Promise<{ status: MessageStatus; bucket: number; count: number }[]> {
  const cases = AGE_BUCKET_MINUTES.map(
    (m, i) => `WHEN @now - created_at < ${m * 60_000} THEN ${i}`,
  ).join(' ');
  return q.all<{ status: MessageStatus; bucket: number; count: number }>(
    `SELECT status, CASE ${cases} ELSE ${AGE_BUCKET_MINUTES.length} END AS bucket, COUNT(*) AS count FROM messages WHERE ${statusIn(LIVE_STATUSES)} GROUP BY status, bucket`,
    { now },
  );
}

/** Messages handed to a provider, by the provider that took them (or last refused them) and status. */
export async function messagesByProvider(
  q: Queries,
): Promise<{ provider: string; status: MessageStatus; count: number }[]> {
  return q.all<{
    provider: string;
    status: MessageStatus;
    count: number;
  }>(
    'SELECT provider_slug AS provider, status, COUNT(*) AS count FROM messages WHERE provider_slug IS NOT NULL GROUP BY provider_slug, status ORDER BY provider_slug',
  );
}
