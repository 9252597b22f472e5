import { getValue, type Queries } from './queries.js';
import type { MessageRow } from './messages.js';

/**
 * Claims up to `limit` due messages with a lease: queued or scheduled ones whose time has come,
 * and `sending` ones whose lease ran out (their worker died). Paused projects are skipped.
 * Each claim is one UPDATE, so two claimers can never take the same message, and each walks
 * its own index to the limit — the cost does not grow with the queue.
 *
 * `node` (node.id) is recorded as the lease's owner on PostgreSQL, where several nodes lease
 * from one queue (finishSending then lets only that node end the hand-off). SQLite has one
 * node and leaves lease_owner NULL.
 */
export async function leaseDueMessages(q: Queries, now: number, leaseUntil: number, limit: number, node: string | null = null): Promise<MessageRow[]> {
  if (q.dialect === 'postgres') return leaseDueMessagesShared(q, { now, leaseUntil, limit, node: node ?? '' });
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

/*
 * PostgreSQL, several nodes on one queue: both statements pick their rows in a CTE with FOR
 * UPDATE SKIP LOCKED and then update them: a row another node is leasing right now (locked by
 * its transaction) is passed over, not waited for, and a row another node leased and committed
 * since this statement's snapshot is re-read once locked and dropped if it no longer qualifies
 * (READ COMMITTED re-checks the WHERE of a locked row). Without the lock, two nodes read the
 * same due rows and both update them: the second UPDATE waits for the first and then, its join
 * to the picked ids still matching, leases the message again.
 *
 * MATERIALIZED: the picked ids are fixed once (and LIMIT applied once), never re-planned into
 * the UPDATE. The order is SQLite's index walk (messages_status_lease: by lease_until;
 * messages_status_due: queued before scheduled, each by next_attempt_at), id breaking ties.
 */
const LEASE_EXPIRED_SHARED = `
  WITH picked AS MATERIALIZED (
    SELECT id FROM messages
     WHERE status = 'sending' AND lease_until <= @now
       AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
     ORDER BY lease_until, id
     LIMIT @limit
     FOR UPDATE OF messages SKIP LOCKED
  )
  UPDATE messages m SET lease_until = @leaseUntil, lease_owner = @node, attempts = m.attempts + 1, updated_at = @now
    FROM picked WHERE m.id = picked.id
  RETURNING m.*`;

const LEASE_DUE_SHARED = `
  WITH picked AS MATERIALIZED (
    SELECT id FROM messages
     WHERE status IN ('queued', 'scheduled') AND next_attempt_at <= @now
       AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
     ORDER BY status, next_attempt_at, id
     LIMIT @limit
     FOR UPDATE OF messages SKIP LOCKED
  )
  UPDATE messages m SET status = 'sending', lease_until = @leaseUntil, lease_owner = @node, attempts = m.attempts + 1, updated_at = @now
    FROM picked WHERE m.id = picked.id
  RETURNING m.*`;

/** A message as a shared lease hands it out: its row, and the node now holding it. */
export type LeasedMessage = MessageRow & { lease_owner: string };

/**
 * The PostgreSQL lease (above): `sending` ones whose lease ran out (their node died or hung)
 * first, then due ones; concurrent nodes never take the same message and none waits for
 * another's lease in progress. One transaction: the leases of one call commit together.
 */
export async function leaseDueMessagesShared(q: Queries, request: { node: string; now: number; leaseUntil: number; limit: number }): Promise<LeasedMessage[]> {
  const { node, now, leaseUntil, limit } = request;
  if (limit <= 0) return [];
  return q.transaction(async (tx) => {
    const bind = { now, leaseUntil, node };
    const expired = await tx.all<LeasedMessage>(LEASE_EXPIRED_SHARED, { ...bind, limit });
    if (expired.length >= limit) return expired;
    const due = await tx.all<LeasedMessage>(LEASE_DUE_SHARED, { ...bind, limit: limit - expired.length });
    return [...expired, ...due];
  });
}

/**
 * PostgreSQL: `node`'s own leases that it holds no hand-off for (every id not in `holding`),
 * renewed to `leaseUntil` and handed back to it. A lease whose commit landed but whose answer
 * the connection's loss cut off leaves messages leased to a node that does not know it; they
 * would otherwise wait for the lease to run out (`delivery.lease_ms`, 5 minutes by default).
 * The attempt was counted by that lease: not again.
 */
export async function reclaimLeases(q: Queries, request: { node: string; now: number; leaseUntil: number; holding: string[] }): Promise<LeasedMessage[]> {
  const { node, now, leaseUntil, holding } = request;
  return q.all<LeasedMessage>(
    `UPDATE messages SET lease_until = @leaseUntil, updated_at = @now
      WHERE status = 'sending' AND lease_owner = @node AND NOT (id = ANY (CAST(@holding AS TEXT[])))
      RETURNING *`,
    { node, now, leaseUntil, holding: `{${holding.map((id) => `"${id}"`).join(',')}}` },
  );
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

/**
 * Ends a hand-off: only a message still `sending` (leased by us) moves. On PostgreSQL "us" is
 * `node`, the lease's owner: a node whose lease ran out while it worked (it hung, then woke)
 * finds the message taken by another node and must not overwrite what that node will record.
 */
export async function finishSending(q: Queries, id: string, to: HandOffEnd, now: number, node: string | null = null): Promise<boolean> {
  const pending = to.pending_recipients === undefined ? undefined : to.pending_recipients === null ? null : JSON.stringify(to.pending_recipients);
  const shared = q.dialect === 'postgres';
  return (
    (await q.run(
      `UPDATE messages SET status = @status, next_attempt_at = @next_attempt_at, lease_until = NULL,${shared ? ' lease_owner = NULL,' : ''}
         provider_slug = COALESCE(@provider_slug, provider_slug), provider_message_id = COALESCE(@provider_message_id, provider_message_id),
         last_error = @last_error, updated_at = @now,
         pending_recipients = CASE WHEN @keep_pending THEN pending_recipients ELSE @pending END
       WHERE id = @id AND status = 'sending'${shared ? ' AND lease_owner = @node' : ''}`,
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
        ...(shared ? { node: node ?? '' } : {}),
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

/** The column qualified: PostgreSQL reads a bare name in DO UPDATE as ambiguous (the row or `excluded`). */
export async function addProviderUsage(q: Queries, accountId: string, period: string): Promise<void> {
  await q.run(
    `INSERT INTO provider_usage (provider_account_id, period, messages) VALUES (?, ?, 1)
     ON CONFLICT (provider_account_id, period) DO UPDATE SET messages = provider_usage.messages + 1`,
    accountId,
    period,
  );
}
