import { fromStatuses, type TargetOf } from '../contract/messageStates.js';
import { type MessageRow, statusIn } from './messages.js';
import { getValue, type Queries } from './queries.js';

/* Status guards from the transition table. */
const LEASE_DUE = statusIn(fromStatuses('lease', 'sending'));
const LEASE_EXPIRED = statusIn(fromStatuses('lease_expired', 'sending'));
const LEASE_RECLAIMED = statusIn(fromStatuses('lease_reclaimed', 'sending'));
const EXPIRES = statusIn(fromStatuses('expire', 'failed'));

/** One UPDATE per claim, so two claimers never take the same message, each walking its own index: the cost does not grow with the queue. */
export async function leaseDueMessages(
  q: Queries,
  now: number,
  leaseUntil: number,
  limit: number,
  node: string | null = null,
): Promise<MessageRow[]> {
  if (q.dialect === 'postgres')
    return leaseDueMessagesShared(q, { now, leaseUntil, limit, node: node ?? '' });
  return q.transaction(async (tx) => {
    const expired = await tx.all<MessageRow>(
      `UPDATE messages SET lease_until = @leaseUntil, attempts = attempts + 1, updated_at = @now
        WHERE id IN (SELECT id FROM messages INDEXED BY messages_status_lease
                      WHERE ${LEASE_EXPIRED} AND lease_until <= @now
                        AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
                      LIMIT @limit)
        RETURNING *`,
      { now, leaseUntil, limit },
    );
    if (expired.length >= limit) return expired;
    const due = await tx.all<MessageRow>(
      `UPDATE messages SET status = 'sending', lease_until = @leaseUntil, attempts = attempts + 1, updated_at = @now
        WHERE id IN (SELECT id FROM messages INDEXED BY messages_status_due
                      WHERE ${LEASE_DUE} AND next_attempt_at <= @now
                        AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
                      LIMIT @limit)
        RETURNING *`,
      { now, leaseUntil, limit: limit - expired.length },
    );
    return [...expired, ...due];
  });
}

/*
 * PostgreSQL: FOR UPDATE SKIP LOCKED passes over rows another node is leasing; without it two nodes read the same due rows
 * and the second UPDATE, waiting for the first, leases the message again. MATERIALIZED: the picked ids are fixed once.
 */
const LEASE_EXPIRED_SHARED = `
  WITH picked AS MATERIALIZED (
    SELECT id FROM messages
     WHERE ${LEASE_EXPIRED} AND lease_until <= @now
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
     WHERE ${LEASE_DUE} AND next_attempt_at <= @now
       AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
     ORDER BY status, next_attempt_at, id
     LIMIT @limit
     FOR UPDATE OF messages SKIP LOCKED
  )
  UPDATE messages m SET status = 'sending', lease_until = @leaseUntil, lease_owner = @node, attempts = m.attempts + 1, updated_at = @now
    FROM picked WHERE m.id = picked.id
  RETURNING m.*`;

export type LeasedMessage = MessageRow & { lease_owner: string };

/** Expired `sending` leases first, then due ones; nodes never take the same message nor wait for another's lease. */
export async function leaseDueMessagesShared(
  q: Queries,
  request: { node: string; now: number; leaseUntil: number; limit: number },
): Promise<LeasedMessage[]> {
  const { node, now, leaseUntil, limit } = request;
  if (limit <= 0) return [];
  return q.transaction(async (tx) => {
    const bind = { now, leaseUntil, node };
    const expired = await tx.all<LeasedMessage>(LEASE_EXPIRED_SHARED, { ...bind, limit });
    if (expired.length >= limit) return expired;
    const due = await tx.all<LeasedMessage>(LEASE_DUE_SHARED, {
      ...bind,
      limit: limit - expired.length,
    });
    return [...expired, ...due];
  });
}

/** A lease commit whose answer was lost leaves messages leased to a node that does not know it; not counted again. */
export async function reclaimLeases(
  q: Queries,
  request: { node: string; now: number; leaseUntil: number; holding: string[] },
): Promise<LeasedMessage[]> {
  const { node, now, leaseUntil, holding } = request;
  return q.all<LeasedMessage>(
    `UPDATE messages SET lease_until = @leaseUntil, updated_at = @now
      WHERE ${LEASE_RECLAIMED} AND lease_owner = @node AND NOT (id = ANY (CAST(@holding AS TEXT[])))
      RETURNING *`,
    { node, now, leaseUntil, holding: `{${holding.map((id) => `"${id}"`).join(',')}}` },
  );
}

export async function expiredMessages(
  q: Queries,
  createdBefore: number,
  limit: number,
): Promise<MessageRow[]> {
  return q.all<MessageRow>(
    `SELECT * FROM messages WHERE ${EXPIRES} AND created_at < ? ORDER BY created_at LIMIT ?`,
    createdBefore,
    limit,
  );
}

export interface HandOffEnd {
  status: TargetOf<'hand_off'>;
  next_attempt_at: number | null;
  /** Omitted or null: unchanged. */
  provider_slug?: string | null;
  /** Omitted or null: unchanged. */
  provider_message_id?: string | null;
  last_error: string | null;
  /** A partial hand-off; omitted: unchanged. */
  pending_recipients?: string[] | null;
}

/** Only a message still `sending` and, on PostgreSQL, leased by `node` moves: a node that hung must not overwrite another's outcome. */
export async function finishSending(
  q: Queries,
  id: string,
  to: HandOffEnd,
  now: number,
  node: string | null = null,
): Promise<boolean> {
  const pending =
    to.pending_recipients === undefined
      ? undefined
      : to.pending_recipients === null
        ? null
        : JSON.stringify(to.pending_recipients);
  const shared = q.dialect === 'postgres';
  return (
    (await q.run(
      `UPDATE messages SET status = @status, next_attempt_at = @next_attempt_at, lease_until = NULL,${shared ? ' lease_owner = NULL,' : ''}
         provider_slug = COALESCE(@provider_slug, provider_slug), provider_message_id = COALESCE(@provider_message_id, provider_message_id),
         last_error = @last_error, updated_at = @now,
         pending_recipients = CASE WHEN @keep_pending THEN pending_recipients ELSE @pending END
       WHERE id = @id AND ${statusIn(fromStatuses('hand_off', to.status))}${shared ? ' AND lease_owner = @node' : ''}`,
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
      `UPDATE messages SET status = 'failed', last_error = 'expired', next_attempt_at = NULL, hold_reason = NULL, updated_at = ? WHERE id = ? AND ${EXPIRES}`,
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
  /** Provider feedback is matched on it. */
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

export type RecipientStatus =
  | 'bounced'
  | 'suppressed'
  | 'delivered'
  | 'soft_bounced'
  | 'complained'
  | 'failed';

export async function insertRecipientOutcome(
  q: Queries,
  row: {
    message_id: string;
    email: string;
    status: RecipientStatus;
    reply: string | null;
    created_at: number;
  },
): Promise<void> {
  await q.run(
    `INSERT INTO recipient_outcomes (message_id, email, status, reply, created_at) VALUES (@message_id, @email, @status, @reply, @created_at)
     ON CONFLICT (message_id, email) DO UPDATE SET status = excluded.status, reply = excluded.reply`,
    row,
  );
}

export async function recipientOutcomesFor(
  q: Queries,
  messageId: string,
): Promise<{ email: string; status: string; reply: string | null }[]> {
  return q.all<{
    email: string;
    status: string;
    reply: string | null;
  }>(
    'SELECT email, status, reply FROM recipient_outcomes WHERE message_id = ? ORDER BY email',
    messageId,
  );
}

export async function providerUsage(
  q: Queries,
  accountId: string,
  period: string,
): Promise<number> {
  return (
    (await getValue<number>(
      q,
      'SELECT messages FROM provider_usage WHERE provider_account_id = ? AND period = ?',
      accountId,
      period,
    )) ?? 0
  );
}

/** PostgreSQL reads a bare name in DO UPDATE as ambiguous (the row or `excluded`). */
export async function addProviderUsage(
  q: Queries,
  accountId: string,
  period: string,
): Promise<void> {
  await q.run(
    `INSERT INTO provider_usage (provider_account_id, period, messages) VALUES (?, ?, 1)
     ON CONFLICT (provider_account_id, period) DO UPDATE SET messages = provider_usage.messages + 1`,
    accountId,
    period,
  );
}
