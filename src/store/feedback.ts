import { sql, type Db } from './db.js';
import type { MessageRow } from './messages.js';

/**
 * The message a provider's id belongs to, within the account's project: the attempt that
 * received that id, else the message's last recorded one, else our own `m.` id when the
 * provider echoes it back.
 */
export function messageForFeedback(db: Db, projectId: string, providerMessageId: string | null, messageId: string | null): MessageRow | undefined {
  if (providerMessageId) {
    const viaAttempt = sql(
      db,
      `SELECT m.* FROM attempts a JOIN messages m ON m.id = a.message_id
        WHERE a.provider_message_id = ? AND m.project_id = ? ORDER BY a.seq DESC LIMIT 1`,
    ).get(providerMessageId, projectId) as MessageRow | undefined;
    if (viaAttempt) return viaAttempt;
  }
  if (messageId) return sql(db, 'SELECT * FROM messages WHERE id = ? AND project_id = ?').get(messageId, projectId) as MessageRow | undefined;
  return undefined;
}

/** Records a feedback item (or a one-time token) for an account; false if it was already there. */
export function recordReceipt(db: Db, accountId: string, key: string, now: number): boolean {
  return sql(db, 'INSERT OR IGNORE INTO feedback_receipts (provider_account_id, receipt_key, received_at) VALUES (?, ?, ?)').run(accountId, key, now).changes === 1;
}

export function receiptExists(db: Db, accountId: string, key: string): boolean {
  return sql(db, 'SELECT 1 FROM feedback_receipts WHERE provider_account_id = ? AND receipt_key = ?').get(accountId, key) !== undefined;
}

/** Receipts older than the window a provider could still resend within are dropped. */
export function pruneReceipts(db: Db, before: number): number {
  return sql(db, 'DELETE FROM feedback_receipts WHERE received_at < ?').run(before).changes;
}

/**
 * How serious each status after hand-off is: a message's status is the most serious outcome
 * any of its recipients has had (one delivered and one bounced recipient: `bounced`).
 */
const SEVERITY: Record<string, number> = { sent: 0, delivered: 1, failed: 2, bounced: 3, complained: 4 };

export function raiseMessageStatus(db: Db, id: string, status: 'delivered' | 'failed' | 'bounced' | 'complained', now: number): boolean {
  const current = sql(db, 'SELECT status FROM messages WHERE id = ?').pluck().get(id) as string | undefined;
  if (current === undefined || !(current in SEVERITY) || SEVERITY[current] >= SEVERITY[status]) return false;
  return sql(db, 'UPDATE messages SET status = ?, updated_at = ? WHERE id = ?').run(status, now, id).changes === 1;
}
