import type { Queries } from './queries.js';

/** States in which a message may still be sent, and so still needs its MIME file. */
export const LIVE_STATUSES = ['queued', 'scheduled', 'paused', 'captured', 'sending'] as const;

/**
 * States a message never leaves for a live one: nothing more is sent (provider feedback may
 * still move a `sent` message on among these). Retention removes only these; expiry ends the
 * live ones first.
 */
export const FINISHED_STATUSES = ['sent', 'delivered', 'bounced', 'complained', 'failed', 'suppressed', 'cancelled'] as const;

export type MessageStatus = (typeof LIVE_STATUSES)[number] | (typeof FINISHED_STATUSES)[number];

export type HoldReason = 'request' | 'project' | null;

export interface MessageRow {
  id: string;
  project_id: string;
  environment: 'production' | 'sandbox';
  source: 'http' | 'smtp';
  status: MessageStatus;
  hold_reason: HoldReason;
  from_email: string;
  /** The From display name, when the message gave one (null before migration 17). */
  from_name?: string | null;
  /** JSON `{to, cc, bcc}`: arrays of addresses, the delivery envelope. */
  recipients: string;
  subject: string;
  tags: string;
  metadata: string;
  category: string | null;
  routing: string;
  provider_options: string | null;
  scheduled_at: number | null;
  spool_path: string;
  size_bytes: number;
  idempotency_key: string | null;
  created_at: number;
  updated_at: number;
  attempts: number;
  next_attempt_at: number | null;
  lease_until: number | null;
  provider_slug: string | null;
  provider_message_id: string | null;
  last_error: string | null;
  /** JSON array of the recipients still owed a hand-off after a partial one; null: all. */
  pending_recipients: string | null;
}

export type NewMessageRow = Omit<MessageRow, 'attempts' | 'lease_until' | 'provider_slug' | 'provider_message_id' | 'last_error' | 'pending_recipients'>;

export async function insertMessage(q: Queries, row: NewMessageRow): Promise<void> {
  await q.run(
    `INSERT INTO messages (id, project_id, environment, source, status, hold_reason, from_email, from_name, recipients, subject, tags,
       metadata, category, routing, provider_options, scheduled_at, spool_path, size_bytes, idempotency_key, created_at,
       updated_at, next_attempt_at)
     VALUES (@id, @project_id, @environment, @source, @status, @hold_reason, @from_email, @from_name, @recipients, @subject, @tags,
       @metadata, @category, @routing, @provider_options, @scheduled_at, @spool_path, @size_bytes, @idempotency_key,
       @created_at, @updated_at, @next_attempt_at)`,
    { ...row, from_name: row.from_name ?? null },
  );
}

export async function getMessage(q: Queries, id: string): Promise<MessageRow | undefined> {
  return q.get<MessageRow>('SELECT * FROM messages WHERE id = ?', id);
}

export async function listMessages(q: Queries, projectId: string, status: string | undefined, limit: number): Promise<MessageRow[]> {
  if (status) {
    return q.all<MessageRow>('SELECT * FROM messages WHERE project_id = ? AND status = ? ORDER BY created_at DESC, id DESC LIMIT ?', projectId, status, limit);
  }
  return q.all<MessageRow>('SELECT * FROM messages WHERE project_id = ? ORDER BY created_at DESC, id DESC LIMIT ?', projectId, limit);
}

/** Moves a message between states only from one of `from`; false when it was not in one of them. */
export async function transitionMessage(
  q: Queries,
  id: string,
  from: MessageStatus[],
  to: { status: MessageStatus; hold_reason: HoldReason; next_attempt_at: number | null; last_error?: string | null },
  now: number,
): Promise<boolean> {
  const placeholders = from.map(() => '?').join(', ');
  return (
    (await q.run(
      `UPDATE messages SET status = ?, hold_reason = ?, next_attempt_at = ?, last_error = COALESCE(?, last_error), updated_at = ?
        WHERE id = ? AND status IN (${placeholders})`,
      to.status,
      to.hold_reason,
      to.next_attempt_at,
      to.last_error ?? null,
      now,
      id,
      ...from,
    )) === 1
  );
}

/** Messages held only because their project was paused, released when it resumes. */
export async function projectHeldMessages(q: Queries, projectId: string): Promise<Pick<MessageRow, 'id' | 'status' | 'scheduled_at'>[]> {
  return q.all<Pick<MessageRow, 'id' | 'status' | 'scheduled_at'>>(
    "SELECT id, status, scheduled_at FROM messages WHERE project_id = ? AND hold_reason = 'project' AND status IN ('paused', 'captured')",
    projectId,
  );
}

export async function messageExists(q: Queries, id: string): Promise<boolean> {
  return (await q.get('SELECT 1 FROM messages WHERE id = ?', id)) !== undefined;
}

/**
 * Live messages that have spool files, walked row by row: a queue of 100,000 is never loaded.
 * The connection is busy while the walk lasts: its loop must not wait on other I/O.
 */
export function liveMessageFiles(q: Queries): AsyncIterable<Pick<MessageRow, 'id' | 'spool_path'>> {
  return q.iterate<Pick<MessageRow, 'id' | 'spool_path'>>(`SELECT id, spool_path FROM messages WHERE status IN (${LIVE_STATUSES.map(() => '?').join(', ')}) AND spool_path != ''`, ...LIVE_STATUSES);
}

/** A message whose spool file is gone cannot be sent: failed, never retried. */
export async function failForMissingSpoolFile(q: Queries, id: string, now: number): Promise<void> {
  await q.run("UPDATE messages SET status = 'failed', last_error = 'spool_file_missing', updated_at = ? WHERE id = ?", now, id);
}
