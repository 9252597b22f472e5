import {
  fromStatuses,
  LIVE_STATUSES,
  MESSAGE_STATUSES,
  type MessageStatus,
  type TransitionCause,
} from '../contract/messageStates.js';
import type { Queries } from './queries.js';

const KNOWN_STATUSES = new Set<string>(MESSAGE_STATUSES);

/** Written out as literals (from the transition table, never input): the statements' plans stay what they were. */
export function statusIn(statuses: readonly MessageStatus[], column = 'status'): string {
  if (statuses.length === 0 || statuses.some((s) => !KNOWN_STATUSES.has(s)))
    throw new Error(`not a list of statuses: ${statuses.join(', ')}`);
  return statuses.length === 1
    ? `${column} = '${statuses[0]}'`
    : `${column} IN (${statuses.map((s) => `'${s}'`).join(', ')})`;
}

export type HoldReason = 'request' | 'project' | null;

export interface MessageRow {
  id: string;
  project_id: string;
  environment: 'production' | 'sandbox';
  source: 'http' | 'smtp';
  status: MessageStatus;
  hold_reason: HoldReason;
  from_email: string;
  /** null before migration 17. */
  from_name?: string | null;
  /** JSON `{to, cc, bcc}`: the delivery envelope. */
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
  /** Still owed after a partial hand-off; null: all. */
  pending_recipients: string | null;
}

export type NewMessageRow = Omit<
  MessageRow,
  | 'attempts'
  | 'lease_until'
  | 'provider_slug'
  | 'provider_message_id'
  | 'last_error'
  | 'pending_recipients'
>;

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

export async function listMessages(
  q: Queries,
  projectId: string,
  status: string | undefined,
  limit: number,
): Promise<MessageRow[]> {
  if (status) {
    return q.all<MessageRow>(
      'SELECT * FROM messages WHERE project_id = ? AND status = ? ORDER BY created_at DESC, id DESC LIMIT ?',
      projectId,
      status,
      limit,
    );
  }
  return q.all<MessageRow>(
    'SELECT * FROM messages WHERE project_id = ? ORDER BY created_at DESC, id DESC LIMIT ?',
    projectId,
    limit,
  );
}

/** Only from a status the transition table lets `cause` leave for it; false otherwise. */
export async function transitionMessage(
  q: Queries,
  id: string,
  cause: TransitionCause,
  to: {
    status: MessageStatus;
    hold_reason: HoldReason;
    next_attempt_at: number | null;
    last_error?: string | null;
  },
  now: number,
): Promise<boolean> {
  return (
    (await q.run(
      `UPDATE messages SET status = ?, hold_reason = ?, next_attempt_at = ?, last_error = COALESCE(?, last_error), updated_at = ?
        WHERE id = ? AND ${statusIn(fromStatuses(cause, to.status))}`,
      to.status,
      to.hold_reason,
      to.next_attempt_at,
      to.last_error ?? null,
      now,
      id,
    )) === 1
  );
}

export async function projectHeldMessages(
  q: Queries,
  projectId: string,
): Promise<Pick<MessageRow, 'id' | 'status' | 'scheduled_at'>[]> {
  return q.all<Pick<MessageRow, 'id' | 'status' | 'scheduled_at'>>(
    `SELECT id, status, scheduled_at FROM messages WHERE project_id = ? AND hold_reason = 'project' AND ${statusIn(fromStatuses('project_resume'))}`,
    projectId,
  );
}

export async function messageExists(q: Queries, id: string): Promise<boolean> {
  return (await q.get('SELECT 1 FROM messages WHERE id = ?', id)) !== undefined;
}

/** Walked row by row: a queue of 100,000 is never loaded. Its loop must not wait on other I/O. */
export function liveMessageFiles(q: Queries): AsyncIterable<Pick<MessageRow, 'id' | 'spool_path'>> {
  return q.iterate<Pick<MessageRow, 'id' | 'spool_path'>>(
    `SELECT id, spool_path FROM messages WHERE ${statusIn(LIVE_STATUSES)} AND spool_path != ''`,
  );
}

/** Failed, never retried. */
export async function failForMissingSpoolFile(q: Queries, id: string, now: number): Promise<void> {
  await q.run(
    `UPDATE messages SET status = 'failed', last_error = 'spool_file_missing', updated_at = ? WHERE id = ? AND ${statusIn(fromStatuses('spool_file_missing', 'failed'))}`,
    now,
    id,
  );
}
