import { getValue, type Queries } from './queries.js';

/** Lifecycle events: the outbox the webhook dispatcher reads. */
export type EventType =
  | 'mail.accepted'
  | 'mail.sent'
  | 'mail.delivered'
  | 'mail.bounced'
  | 'mail.complained'
  | 'mail.failed'
  | 'mail.suppressed';

export interface EventRow {
  seq: number;
  project_id: string;
  message_id: string | null;
  type: EventType;
  created_at: number;
  data: string;
}

export async function insertEvent(q: Queries, row: Omit<EventRow, 'seq'>): Promise<void> {
  await q.run(
    'INSERT INTO events (project_id, message_id, type, created_at, data) VALUES (@project_id, @message_id, @type, @created_at, @data)',
    row,
  );
}

export async function eventsForMessage(q: Queries, messageId: string): Promise<EventRow[]> {
  return q.all<EventRow>('SELECT * FROM events WHERE message_id = ? ORDER BY seq', messageId);
}

/**
 * Inserts a lifecycle event for a message, carrying the `data.mail` block recorded at
 * acceptance (so every event of a mail echoes the same uid, recipients, tags and metadata).
 */
export async function insertMailEvent(
  q: Queries,
  message: { id: string; project_id: string; subject: string; from_email: string },
  type: EventType,
  now: number,
  extra: Record<string, unknown>,
): Promise<void> {
  const accepted = await getValue<string>(
    q,
    "SELECT data FROM events WHERE message_id = ? AND type = 'mail.accepted'",
    message.id,
  );
  const mail = accepted
    ? (JSON.parse(accepted) as { mail: unknown }).mail
    : { uid: message.id, subject: message.subject, from: message.from_email };
  await insertEvent(q, {
    project_id: message.project_id,
    message_id: message.id,
    type,
    created_at: now,
    data: JSON.stringify({ mail, ...extra }),
  });
}
