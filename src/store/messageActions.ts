import {
  fromStatuses,
  type MessageStatus,
  removableFrom,
  type TransitionCause,
} from '../contract/messageStates.js';
import { BODY_IN_INDEX } from './messageBodies.js';
import { statusIn } from './messages.js';
import { inJsonArray, type Queries } from './queries.js';

export type MessageAction = Extract<TransitionCause, 'release' | 'cancel' | 'retry'>;

/** `release`: held or captured goes on; `cancel`: anything not yet handed off stops; `retry`: a queued message due at once. */
export const ACTION_FROM: Record<MessageAction, readonly MessageStatus[]> = {
  release: fromStatuses('release'),
  cancel: fromStatuses('cancel'),
  retry: fromStatuses('retry'),
};

/** SQLite: `[rowid, id]` (the id checked too: a deleted last row's rowid can be reused). PostgreSQL: its id. */
export type MessageKey = [number, string] | string;

const liveProject = 'project_id IN (SELECT id FROM projects WHERE deleted_at IS NULL)';

export interface ChangedMessage {
  id: string;
  project_id: string;
  environment: 'production' | 'sandbox';
}

export interface MessagesChanged {
  project_id: string;
  environment: 'production' | 'sandbox';
  count: number;
}

export function countChanged(
  into: MessagesChanged[],
  changed: readonly (ChangedMessage | MessagesChanged)[],
): MessagesChanged[] {
  for (const c of changed) {
    const n = 'count' in c ? c.count : 1;
    const place = into.find(
      (p) => p.project_id === c.project_id && p.environment === c.environment,
    );
    if (place) place.count += n;
    else into.push({ project_id: c.project_id, environment: c.environment, count: n });
  }
  return into;
}

/** One statement per chunk. Release never frees a message of a deleted project, nor one held by a still-paused project. */
export async function applyMessageAction(
  q: Queries,
  action: MessageAction,
  messages: { ids: readonly string[] } | { rows: string },
  now: number,
): Promise<ChangedMessage[]> {
  if ('ids' in messages && messages.ids.length === 0) return [];
  const ids =
    'ids' in messages || q.dialect === 'postgres'
      ? inJsonArray(q, 'id', '@list')
      : 'rowid IN (SELECT value ->> 0 FROM json_each(@list)) AND id IN (SELECT value ->> 1 FROM json_each(@list))';
  const params = { list: 'ids' in messages ? JSON.stringify(messages.ids) : messages.rows, now };
  const statement =
    action === 'release'
      ? `UPDATE messages SET
           status = CASE WHEN scheduled_at IS NOT NULL AND scheduled_at > @now THEN 'scheduled' ELSE 'queued' END,
           next_attempt_at = CASE WHEN scheduled_at IS NOT NULL AND scheduled_at > @now THEN scheduled_at ELSE @now END,
           hold_reason = NULL, updated_at = @now
         WHERE ${ids} AND ${statusIn(ACTION_FROM.release)} AND ${liveProject}
           AND NOT (hold_reason = 'project' AND project_id IN (SELECT id FROM projects WHERE paused = 1))
         RETURNING id, project_id, environment`
      : action === 'cancel'
        ? `UPDATE messages SET status = 'cancelled', hold_reason = NULL, next_attempt_at = NULL, updated_at = @now
           WHERE ${ids} AND ${statusIn(fromStatuses('cancel', 'cancelled'))}
           RETURNING id, project_id, environment`
        : `UPDATE messages SET next_attempt_at = @now, updated_at = @now
           WHERE ${ids} AND ${statusIn(fromStatuses('retry', 'queued'))} AND next_attempt_at > @now
           RETURNING id, project_id, environment`;
  return q.all<ChangedMessage>(statement, params);
}

/** The caller runs it in one transaction; returns its spool file to remove after the commit (null: none, or not captured). */
export async function deleteCapturedMessage(q: Queries, id: string): Promise<string | null> {
  const row = await q.get<{
    spool_path: string;
    project_id: string;
    environment: string;
    idempotency_key: string | null;
  }>(
    `SELECT spool_path, project_id, environment, idempotency_key FROM messages WHERE id = ? AND ${statusIn(removableFrom('delete'))}`,
    id,
  );
  if (!row) return null;
  await q.run('DELETE FROM attempts WHERE message_id = ?', id);
  await q.run('DELETE FROM recipient_outcomes WHERE message_id = ?', id);
  if (row.idempotency_key !== null) {
    await q.run(
      'DELETE FROM idempotency_keys WHERE project_id = ? AND environment = ? AND key = ? AND message_id = ?',
      row.project_id,
      row.environment,
      row.idempotency_key,
      id,
    );
  }
  await q.run(
    "DELETE FROM events WHERE message_id = ? AND seq NOT IN (SELECT event_seq FROM webhook_deliveries WHERE status = 'pending' AND event_seq IS NOT NULL)",
    id,
  );
  await q.run('DELETE FROM message_bodies WHERE message_id = ?', id);
  await q.run('DELETE FROM viewer_links WHERE message_id = ?', id);
  // PostgreSQL keeps every body as rows (migration 8), with no foreign key to cascade from.
  if (q.dialect === 'postgres')
    await q.run('DELETE FROM message_body_chunks WHERE message_id = ?', id);
  await q.run('DELETE FROM messages WHERE id = ?', id);
  return row.spool_path === BODY_IN_INDEX || q.dialect === 'postgres' ? null : row.spool_path;
}
