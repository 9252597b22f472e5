import { sql, type Db } from './db.js';

/** Lifecycle events: the outbox the webhook dispatcher reads. */
export type EventType =
  | 'mail.accepted' | 'mail.sent' | 'mail.delivered' | 'mail.bounced' | 'mail.complained' | 'mail.failed' | 'mail.suppressed';

export interface EventRow {
  seq: number;
  project_id: string;
  message_id: string | null;
  type: EventType;
  created_at: number;
  data: string;
}

export function insertEvent(db: Db, row: Omit<EventRow, 'seq'>): void {
  sql(db, 'INSERT INTO events (project_id, message_id, type, created_at, data) VALUES (@project_id, @message_id, @type, @created_at, @data)').run(row);
}

export function eventsForMessage(db: Db, messageId: string): EventRow[] {
  return sql(db, 'SELECT * FROM events WHERE message_id = ? ORDER BY seq').all(messageId) as EventRow[];
}

/**
 * Inserts a lifecycle event for a message, carrying the `data.mail` block recorded at
 * acceptance (so every event of a mail echoes the same uid, recipients, tags and metadata).
 */
export function insertMailEvent(
  db: Db,
  message: { id: string; project_id: string; subject: string; from_email: string },
  type: EventType,
  now: number,
  extra: Record<string, unknown>,
): void {
  const accepted = sql(db, "SELECT data FROM events WHERE message_id = ? AND type = 'mail.accepted'").pluck().get(message.id) as string | undefined;
  const mail = accepted ? (JSON.parse(accepted) as { mail: unknown }).mail : { uid: message.id, subject: message.subject, from: message.from_email };
  insertEvent(db, { project_id: message.project_id, message_id: message.id, type, created_at: now, data: JSON.stringify({ mail, ...extra }) });
}
