import { fromStatuses, type TargetOf } from '../contract/messageStates.js';
import { type MessageRow, statusIn } from './messages.js';
import type { Queries } from './queries.js';

/** The attempt that received that id, else the message's last one, else our own `m.` id echoed back. */
export async function messageForFeedback(
  q: Queries,
  projectId: string,
  providerMessageId: string | null,
  messageId: string | null,
): Promise<MessageRow | undefined> {
  if (providerMessageId) {
    const viaAttempt = await q.get<MessageRow>(
      `SELECT m.* FROM attempts a JOIN messages m ON m.id = a.message_id
        WHERE a.provider_message_id = ? AND m.project_id = ? ORDER BY a.seq DESC LIMIT 1`,
      providerMessageId,
      projectId,
    );
    if (viaAttempt) return viaAttempt;
  }
  if (messageId)
    return q.get<MessageRow>(
      'SELECT * FROM messages WHERE id = ? AND project_id = ?',
      messageId,
      projectId,
    );
  return undefined;
}

export async function recordReceipt(
  q: Queries,
  accountId: string,
  key: string,
  now: number,
): Promise<boolean> {
  return (
    (await q.run(
      'INSERT INTO feedback_receipts (provider_account_id, receipt_key, received_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
      accountId,
      key,
      now,
    )) === 1
  );
}

export async function receiptExists(q: Queries, accountId: string, key: string): Promise<boolean> {
  return (
    (await q.get(
      'SELECT 1 FROM feedback_receipts WHERE provider_account_id = ? AND receipt_key = ?',
      accountId,
      key,
    )) !== undefined
  );
}

export async function pruneReceipts(q: Queries, before: number): Promise<number> {
  return q.run('DELETE FROM feedback_receipts WHERE received_at < ?', before);
}

/** The most serious outcome of any recipient: feedback moves it only from a milder status; false when it did not move. */
export async function raiseMessageStatus(
  q: Queries,
  id: string,
  status: TargetOf<'provider_feedback'>,
  now: number,
): Promise<boolean> {
  return (
    (await q.run(
      `UPDATE messages SET status = ?, updated_at = ? WHERE id = ? AND ${statusIn(fromStatuses('provider_feedback', status))}`,
      status,
      now,
      id,
    )) === 1
  );
}
