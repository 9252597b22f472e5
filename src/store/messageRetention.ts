import { sql, type Db } from './db.js';
import { BODY_IN_INDEX } from './messageBodies.js';
import { FINISHED_STATUSES } from './messages.js';

const DAY_MS = 86_400_000;
const finishedList = FINISHED_STATUSES.map((s) => `'${s}'`).join(', ');

/**
 * Removes, in one transaction, up to `limit` finished messages created before their project's
 * retention (`retention_days` of the project, else `defaultRetentionDays`): the row, its
 * body if the index holds it, its attempts and recipient outcomes, and its events, except an event a pending webhook delivery
 * still has to send. Returns the spool files of the removed rows that had one: the caller retires them after
 * the commit (a crash between the two leaves files without rows, which start-up removes).
 */
export function pruneFinishedMessages(db: Db, now: number, defaultRetentionDays: number, limit: number): string[] {
  const projects = sql(db, 'SELECT id, retention_days FROM projects').all() as { id: string; retention_days: number | null }[];
  // The (project_id, created_at) index walks only the old rows of each project.
  const due = sql(db, `SELECT id, spool_path FROM messages WHERE project_id = ? AND created_at < ? AND status IN (${finishedList}) ORDER BY created_at LIMIT ?`);
  // One statement per table for the whole chunk: the pending-deliveries subquery is built once.
  const ids = "SELECT value FROM json_each(?)";
  const deleteAttempts = sql(db, `DELETE FROM attempts WHERE message_id IN (${ids})`);
  const deleteOutcomes = sql(db, `DELETE FROM recipient_outcomes WHERE message_id IN (${ids})`);
  const deleteEvents = sql(
    db,
    `DELETE FROM events WHERE message_id IN (${ids}) AND seq NOT IN (SELECT event_seq FROM webhook_deliveries WHERE status = 'pending' AND event_seq IS NOT NULL)`,
  );
  const deleteBodies = sql(db, `DELETE FROM message_bodies WHERE message_id IN (${ids})`);
  const deleteMessages = sql(db, `DELETE FROM messages WHERE id IN (${ids})`);
  return db.transaction(() => {
    const rows: { id: string; spool_path: string }[] = [];
    for (const project of projects) {
      const cutoff = now - DAY_MS * (project.retention_days ?? defaultRetentionDays);
      rows.push(...(due.all(project.id, cutoff, limit - rows.length) as { id: string; spool_path: string }[]));
      if (rows.length >= limit) break;
    }
    if (rows.length === 0) return [];
    const idList = JSON.stringify(rows.map((r) => r.id));
    deleteAttempts.run(idList);
    deleteOutcomes.run(idList);
    deleteEvents.run(idList);
    deleteBodies.run(idList);
    deleteMessages.run(idList);
    return rows.map((r) => r.spool_path).filter((p) => p !== BODY_IN_INDEX);
    // Immediate: the rows read are the rows deleted, with no writer in between.
  }).immediate();
}
