/** The events outbox (store/events.ts) as webhooks read it: the fan-out cursor on SQLite, the events after it, an event's body. */
import { getValue, inJsonArray, type Queries } from './queries.js';

export async function webhookCursor(q: Queries): Promise<number> {
  return (await getValue<number>(q, 'SELECT event_seq FROM webhook_cursor WHERE id = 1'))!;
}

export async function setWebhookCursor(q: Queries, seq: number): Promise<void> {
  await q.run('UPDATE webhook_cursor SET event_seq = ? WHERE id = 1', seq);
}

export interface OutboxEventHead {
  seq: number;
  project_id: string;
  type: string;
}

export async function eventsAfter(
  q: Queries,
  afterSeq: number,
  limit: number,
): Promise<OutboxEventHead[]> {
  return q.all<OutboxEventHead>(
    'SELECT seq, project_id, type FROM events WHERE seq > ? ORDER BY seq LIMIT ?',
    afterSeq,
    limit,
  );
}

export async function latestEventSeq(q: Queries): Promise<number> {
  return (await getValue<number>(q, 'SELECT COALESCE(MAX(seq), 0) FROM events'))!;
}

export interface OutboxEvent {
  type: string;
  created_at: number;
  data: string;
}

export async function outboxEvent(q: Queries, seq: number): Promise<OutboxEvent | undefined> {
  return q.get<OutboxEvent>('SELECT type, created_at, data FROM events WHERE seq = ?', seq);
}

/** One statement instead of one per delivery. Missing ones are absent. */
export async function outboxEvents(q: Queries, seqs: number[]): Promise<Map<number, OutboxEvent>> {
  const rows = await q.all<OutboxEvent & { seq: number }>(
    `SELECT seq, type, created_at, data FROM events WHERE ${inJsonArray(q, 'seq', '?', 'bigint')}`,
    JSON.stringify(seqs),
  );
  return new Map(rows.map(({ seq, ...event }) => [seq, event]));
}
