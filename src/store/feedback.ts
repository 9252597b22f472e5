import { getValue, type Queries } from './queries.js';
import type { MessageRow } from './messages.js';

/**
 * The message a provider's id belongs to, within the account's project: the attempt that
 * received that id, else the message's last recorded one, else our own `m.` id when the
 * provider echoes it back.
 */
export async function messageForFeedback(q: Queries, projectId: string, providerMessageId: string | null, messageId: string | null): Promise<MessageRow | undefined> {
  if (providerMessageId) {
    const viaAttempt = await q.get<MessageRow>(
      `SELECT m.* FROM attempts a JOIN messages m ON m.id = a.message_id
        WHERE a.provider_message_id = ? AND m.project_id = ? ORDER BY a.seq DESC LIMIT 1`,
      providerMessageId,
      projectId,
    );
    if (viaAttempt) return viaAttempt;
  }
  if (messageId) return q.get<MessageRow>('SELECT * FROM messages WHERE id = ? AND project_id = ?', messageId, projectId);
  return undefined;
}

/** Records a feedback item (or a one-time token) for an account; false if it was already there. */
export async function recordReceipt(q: Queries, accountId: string, key: string, now: number): Promise<boolean> {
  return (await q.run('INSERT INTO feedback_receipts (provider_account_id, receipt_key, received_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', accountId, key, now)) === 1;
}

export async function receiptExists(q: Queries, accountId: string, key: string): Promise<boolean> {
  return (await q.get('SELECT 1 FROM feedback_receipts WHERE provider_account_id = ? AND receipt_key = ?', accountId, key)) !== undefined;
}

/** Receipts older than the window a provider could still resend within are dropped. */
export async function pruneReceipts(q: Queries, before: number): Promise<number> {
  return q.run('DELETE FROM feedback_receipts WHERE received_at < ?', before);
}

/**
 * How serious each status after hand-off is: a message's status is the most serious outcome
 * any of its recipients has had (one delivered and one bounced recipient: `bounced`).
 */
const SEVERITY: Record<string, number> = { sent: 0, delivered: 1, failed: 2, bounced: 3, complained: 4 };

export async function raiseMessageStatus(q: Queries, id: string, status: 'delivered' | 'failed' | 'bounced' | 'complained', now: number): Promise<boolean> {
  const current = await getValue<string>(q, 'SELECT status FROM messages WHERE id = ?', id);
  if (current === undefined || !(current in SEVERITY) || SEVERITY[current] >= SEVERITY[status]) return false;
  return (await q.run('UPDATE messages SET status = ?, updated_at = ? WHERE id = ?', status, now, id)) === 1;
}
