import { getValue, type Queries } from './queries.js';
import type { MessageRow } from './messages.js';

/**
 * Claims up to `limit` due messages with a lease: queued or scheduled ones whose time has come,
 * and `sending` ones whose lease ran out (their worker died). Paused projects are skipped.
 * Each claim is one UPDATE, so two claimers can never take the same message, and each walks
 * its own index to the limit — the cost does not grow with the queue.
 */
export async function leaseDueMessages(q: Queries, now: number, leaseUntil: number, limit: number): Promise<MessageRow[]> {
  return q.transaction(async (tx) => {
    const expired = await tx.all<MessageRow>(
      `UPDATE messages SET lease_until = @leaseUntil, attempts = attempts + 1, updated_at = @now
        WHERE id IN (SELECT id FROM messages INDEXED BY messages_status_lease
                      WHERE status = 'sending' AND lease_until <= @now
                        AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
                      LIMIT @limit)
        RETURNING *`,
      { now, leaseUntil, limit },
    );
    if (expired.length >= limit) return expired;
    const due = await tx.all<MessageRow>(
      `UPDATE messages SET status = 'sending', lease_until = @leaseUntil, attempts = attempts + 1, updated_at = @now
        WHERE id IN (SELECT id FROM messages INDEXED BY messages_status_due
                      WHERE status IN ('queued', 'scheduled') AND next_attempt_at <= @now
                        AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
                      LIMIT @limit)
        RETURNING *`,
      { now, leaseUntil, limit: limit - expired.length },
    );
    return [...expired, ...due];
  });
}

/** Messages past their maximum age in a state that will not deliver them, at most `limit`. */
export async function expiredMessages(q: Queries, createdBefore: number, limit: number): Promise<MessageRow[]> {
  return q.all<MessageRow>(
    `SELECT * FROM messages WHERE status IN ('queued', 'scheduled', 'paused', 'captured') AND created_at < ? ORDER BY created_at LIMIT ?`,
    createdBefore,
    limit,
  );
}

/** Where a hand-off leaves its message (both stores' outcome writes set these columns). */
export interface HandOffEnd {
  status: 'sent' | 'queued' | 'failed' | 'suppressed';
  next_attempt_at: number | null;
  /** Omitted or null: unchanged. */
  provider_slug?: string | null;
  /** Omitted or null: unchanged. */
  provider_message_id?: string | null;
  last_error: string | null;
  /** Recipients still owed a hand-off (a partial one); omitted: unchanged. */
  pending_recipients?: string[] | null;
}

/** Ends a hand-off: only a message still `sending` (leased by us) moves. */
export async function finishSending(q: Queries, id: string, to: HandOffEnd, now: number): Promise<boolean> {
  const pending = to.pending_recipients === undefined ? undefined : to.pending_recipients === null ? null : JSON.stringify(to.pending_recipients);
  return (
    (await q.run(
      `UPDATE messages SET status = @status, next_attempt_at = @next_attempt_at, lease_until = NULL,
         provider_slug = COALESCE(@provider_slug, provider_slug), provider_message_id = COALESCE(@provider_message_id, provider_message_id),
         last_error = @last_error, updated_at = @now,
         pending_recipients = CASE WHEN @keep_pending THEN pending_recipients ELSE @pending END
       WHERE id = @id AND status = 'sending'`,
      {
        id,
        now,
        status: to.status,
        next_attempt_at: to.next_attempt_at,
        provider_slug: to.provider_slug ?? null,
        provider_message_id: to.provider_message_id ?? null,
        last_error: to.last_error,
        keep_pending: pending === undefined ? 1 : 0,
        pending: pending ?? null,
      },
    )) === 1
  );
}

export async function failExpired(q: Queries, id: string, now: number): Promise<boolean> {
  return (
    (await q.run(
      `UPDATE messages SET status = 'failed', last_error = 'expired', next_attempt_at = NULL, hold_reason = NULL, updated_at = ? WHERE id = ? AND status IN ('queued', 'scheduled', 'paused', 'captured')`,
      now,
      id,
    )) === 1
  );
}

export interface AttemptRow {
  message_id: string;
  provider_account_id: string | null;
  provider_slug: string | null;
  started_at: number;
  finished_at: number;
  outcome: 'sent' | 'temporary' | 'account' | 'permanent';
  reply: string | null;
  /** The provider's id for a `sent` hand-off: provider feedback is matched on it. */
  provider_message_id: string | null;
}

export async function insertAttempt(q: Queries, row: AttemptRow): Promise<void> {
  await q.run(
    `INSERT INTO attempts (message_id, provider_account_id, provider_slug, started_at, finished_at, outcome, reply, provider_message_id)
     VALUES (@message_id, @provider_account_id, @provider_slug, @started_at, @finished_at, @outcome, @reply, @provider_message_id)`,
    { ...row },
  );
}

export async function attemptsFor(q: Queries, messageId: string): Promise<AttemptRow[]> {
  return q.all<AttemptRow>('SELECT * FROM attempts WHERE message_id = ? ORDER BY seq', messageId);
}

export type RecipientStatus = 'bounced' | 'suppressed' | 'delivered' | 'soft_bounced' | 'complained' | 'failed';

export async function insertRecipientOutcome(q: Queries, row: { message_id: string; email: string; status: RecipientStatus; reply: string | null; created_at: number }): Promise<void> {
  await q.run(
    `INSERT INTO recipient_outcomes (message_id, email, status, reply, created_at) VALUES (@message_id, @email, @status, @reply, @created_at)
     ON CONFLICT (message_id, email) DO UPDATE SET status = excluded.status, reply = excluded.reply`,
    row,
  );
}

export async function recipientOutcomesFor(q: Queries, messageId: string): Promise<{ email: string; status: string; reply: string | null }[]> {
  return q.all<{
    email: string;
    status: string;
    reply: string | null;
  }>('SELECT email, status, reply FROM recipient_outcomes WHERE message_id = ? ORDER BY email', messageId);
}

export async function providerUsage(q: Queries, accountId: string, period: string): Promise<number> {
  return (await getValue<number>(q, 'SELECT messages FROM provider_usage WHERE provider_account_id = ? AND period = ?', accountId, period)) ?? 0;
}

export async function addProviderUsage(q: Queries, accountId: string, period: string): Promise<void> {
  await q.run(
    `INSERT INTO provider_usage (provider_account_id, period, messages) VALUES (?, ?, 1)
     ON CONFLICT (provider_account_id, period) DO UPDATE SET messages = messages + 1`,
    accountId,
    period,
  );
}
