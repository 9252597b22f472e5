import { sql, type Db } from './db.js';

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

export function insertMessage(db: Db, row: NewMessageRow): void {
  sql(
    db,
    `INSERT INTO messages (id, project_id, environment, source, status, hold_reason, from_email, recipients, subject, tags,
       metadata, category, routing, provider_options, scheduled_at, spool_path, size_bytes, idempotency_key, created_at,
       updated_at, next_attempt_at)
     VALUES (@id, @project_id, @environment, @source, @status, @hold_reason, @from_email, @recipients, @subject, @tags,
       @metadata, @category, @routing, @provider_options, @scheduled_at, @spool_path, @size_bytes, @idempotency_key,
       @created_at, @updated_at, @next_attempt_at)`,
  ).run(row);
}

export function getMessage(db: Db, id: string): MessageRow | undefined {
  return sql(db, 'SELECT * FROM messages WHERE id = ?').get(id) as MessageRow | undefined;
}

export function listMessages(db: Db, projectId: string, status: string | undefined, limit: number): MessageRow[] {
  if (status) {
    return sql(db, 'SELECT * FROM messages WHERE project_id = ? AND status = ? ORDER BY created_at DESC, id DESC LIMIT ?').all(
      projectId, status, limit,
    ) as MessageRow[];
  }
  return sql(db, 'SELECT * FROM messages WHERE project_id = ? ORDER BY created_at DESC, id DESC LIMIT ?').all(projectId, limit) as MessageRow[];
}

/** Moves a message between states only from one of `from`; false when it was not in one of them. */
export function transitionMessage(
  db: Db,
  id: string,
  from: MessageStatus[],
  to: { status: MessageStatus; hold_reason: HoldReason; next_attempt_at: number | null; last_error?: string | null },
  now: number,
): boolean {
  const placeholders = from.map(() => '?').join(', ');
  return (
    sql(
      db,
      `UPDATE messages SET status = ?, hold_reason = ?, next_attempt_at = ?, last_error = COALESCE(?, last_error), updated_at = ?
        WHERE id = ? AND status IN (${placeholders})`,
    ).run(to.status, to.hold_reason, to.next_attempt_at, to.last_error ?? null, now, id, ...from).changes === 1
  );
}

/** Messages held only because their project was paused, released when it resumes. */
export function projectHeldMessages(db: Db, projectId: string): Pick<MessageRow, 'id' | 'status' | 'scheduled_at'>[] {
  return sql(db, "SELECT id, status, scheduled_at FROM messages WHERE project_id = ? AND hold_reason = 'project' AND status IN ('paused', 'captured')").all(
    projectId,
  ) as Pick<MessageRow, 'id' | 'status' | 'scheduled_at'>[];
}

export function messageExists(db: Db, id: string): boolean {
  return sql(db, 'SELECT 1 FROM messages WHERE id = ?').get(id) !== undefined;
}

/** Live messages that have spool files, walked row by row: a queue of 100,000 is never loaded. */
export function liveMessageFiles(db: Db): IterableIterator<Pick<MessageRow, 'id' | 'spool_path'>> {
  return sql(db, `SELECT id, spool_path FROM messages WHERE status IN (${LIVE_STATUSES.map(() => '?').join(', ')}) AND spool_path != ''`).iterate(...LIVE_STATUSES) as IterableIterator<
    Pick<MessageRow, 'id' | 'spool_path'>
  >;
}

/** A message whose spool file is gone cannot be sent: failed, never retried. */
export function failForMissingSpoolFile(db: Db, id: string, now: number): void {
  sql(db, "UPDATE messages SET status = 'failed', last_error = 'spool_file_missing', updated_at = ? WHERE id = ?").run(now, id);
}
