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
