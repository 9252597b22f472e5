import { removableFrom } from '../contract/messageStates.js';
import { BODY_IN_INDEX } from './messageBodies.js';
import { statusIn } from './messages.js';
import { inJsonArray, type Queries } from './queries.js';

const DAY_MS = 86_400_000;

/** Returns the removed rows' spool files, which the caller retires after the commit (start-up removes any a crash leaves). */
export async function pruneFinishedMessages(
  q: Queries,
  now: number,
  defaultRetentionDays: number,
  limit: number,
): Promise<string[]> {
  return (await pruneFinishedMessageRows(q, now, defaultRetentionDays, limit)).spoolFiles;
}

/** Also counts the messages removed: a sweep goes on while chunks come back full, which the files cannot tell. */
export async function pruneFinishedMessageRows(
  q: Queries,
  now: number,
  defaultRetentionDays: number,
  limit: number,
): Promise<{ removed: number; spoolFiles: string[] }> {
  const projects = await q.all<{ id: string; retention_days: number | null }>(
    'SELECT id, retention_days FROM projects',
  );
  const due = `SELECT id, spool_path FROM messages WHERE project_id = ? AND created_at < ? AND ${statusIn(removableFrom('retention'))} ORDER BY created_at LIMIT ?`;
  // One statement per table for the whole chunk: the pending-deliveries subquery is built once.
  const listed = (column: string) => inJsonArray(q, column, '?');
  const deleteAttempts = `DELETE FROM attempts WHERE ${listed('message_id')}`;
  const deleteOutcomes = `DELETE FROM recipient_outcomes WHERE ${listed('message_id')}`;
  const deleteEvents = `DELETE FROM events WHERE ${listed('message_id')} AND seq NOT IN (SELECT event_seq FROM webhook_deliveries WHERE status = 'pending' AND event_seq IS NOT NULL)`;
  const deleteBodies = `DELETE FROM message_bodies WHERE ${listed('message_id')}`;
  const deleteLinks = `DELETE FROM viewer_links WHERE ${listed('message_id')}`;
  const deleteMessages = `DELETE FROM messages WHERE ${listed('id')}`;
  // PostgreSQL keeps every body as rows, with no foreign key to cascade from.
  const deleteBodyChunks =
    q.dialect === 'postgres'
      ? `DELETE FROM message_body_chunks WHERE ${listed('message_id')}`
      : null;
  // Immediate: the rows read are the rows deleted, with no writer in between.
  return q.transaction(async (tx) => {
    const rows: { id: string; spool_path: string }[] = [];
    for (const project of projects) {
      const cutoff = now - DAY_MS * (project.retention_days ?? defaultRetentionDays);
      rows.push(
        ...(await tx.all<{ id: string; spool_path: string }>(
          due,
          project.id,
          cutoff,
          limit - rows.length,
        )),
      );
      if (rows.length >= limit) break;
    }
    if (rows.length === 0) return { removed: 0, spoolFiles: [] };
    const idList = JSON.stringify(rows.map((r) => r.id));
    await tx.run(deleteAttempts, idList);
    await tx.run(deleteOutcomes, idList);
    await tx.run(deleteEvents, idList);
    await tx.run(deleteBodies, idList);
    await tx.run(deleteLinks, idList);
    if (deleteBodyChunks) await tx.run(deleteBodyChunks, idList);
    await tx.run(deleteMessages, idList);
    if (q.dialect === 'postgres') return { removed: rows.length, spoolFiles: [] };
    return {
      removed: rows.length,
      spoolFiles: rows.map((r) => r.spool_path).filter((p) => p !== BODY_IN_INDEX),
    };
  });
}
