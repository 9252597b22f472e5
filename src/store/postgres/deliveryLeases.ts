import type { Pool } from 'pg';
import type { HandOffEnd } from '../delivery.js';
import type { MessageRow } from '../messages.js';
import { bigintNumber, nullableBigintNumber } from './bigintNumber.js';

/**
 * Delivery leases on PostgreSQL, shared by several nodes: the twins of store/delivery.ts's
 * leaseDueMessages and finishSending. Not yet wired to the scheduler (issue 23).
 */

/** A message as a lease hands it out: its row, and the node now holding it. */
export interface LeasedMessage extends MessageRow {
  lease_owner: string;
}

export interface LeaseRequest {
  /** The leasing node's id (node.id): recorded as the lease's owner. */
  node: string;
  now: number;
  leaseUntil: number;
  limit: number;
}

/** The row as pg returns it: BIGINT columns as strings. */
type MessageRowFromPostgres = Omit<LeasedMessage, 'scheduled_at' | 'size_bytes' | 'created_at' | 'updated_at' | 'next_attempt_at' | 'lease_until'> & {
  scheduled_at: string | null;
  size_bytes: string;
  created_at: string;
  updated_at: string;
  next_attempt_at: string | null;
  lease_until: string | null;
};

function leasedMessage(row: MessageRowFromPostgres): LeasedMessage {
  return {
    ...row,
    scheduled_at: nullableBigintNumber(row.scheduled_at, 'messages.scheduled_at'),
    size_bytes: bigintNumber(row.size_bytes, 'messages.size_bytes'),
    created_at: bigintNumber(row.created_at, 'messages.created_at'),
    updated_at: bigintNumber(row.updated_at, 'messages.updated_at'),
    next_attempt_at: nullableBigintNumber(row.next_attempt_at, 'messages.next_attempt_at'),
    lease_until: nullableBigintNumber(row.lease_until, 'messages.lease_until'),
  };
}

/*
 * Both statements pick their rows in a CTE with FOR UPDATE SKIP LOCKED and then update them:
 * a row another node is leasing right now (locked by its transaction) is passed over, not
 * waited for, and a row another node leased and committed since this statement's snapshot is
 * re-read once locked and dropped if it no longer qualifies (READ COMMITTED re-checks the
 * WHERE of a locked row). Without the lock, two nodes read the same due rows and both update
 * them: the second UPDATE waits for the first and then, its join to the picked ids still
 * matching, leases the message again.
 *
 * MATERIALIZED: the picked ids are fixed once (and LIMIT applied once), never re-planned into
 * the UPDATE. The order is SQLite's index walk (messages_status_lease: by lease_until;
 * messages_status_due: queued before scheduled, each by next_attempt_at), id breaking ties.
 */
const LEASE_EXPIRED = `
  WITH picked AS MATERIALIZED (
    SELECT id FROM messages
     WHERE status = 'sending' AND lease_until <= $1
       AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
     ORDER BY lease_until, id
     LIMIT $3
     FOR UPDATE OF messages SKIP LOCKED
  )
  UPDATE messages m SET lease_until = $2, lease_owner = $4, attempts = m.attempts + 1, updated_at = $1
    FROM picked WHERE m.id = picked.id
  RETURNING m.*`;

const LEASE_DUE = `
  WITH picked AS MATERIALIZED (
    SELECT id FROM messages
     WHERE status IN ('queued', 'scheduled') AND next_attempt_at <= $1
       AND project_id NOT IN (SELECT id FROM projects WHERE paused = 1)
     ORDER BY status, next_attempt_at, id
     LIMIT $3
     FOR UPDATE OF messages SKIP LOCKED
  )
  UPDATE messages m SET status = 'sending', lease_until = $2, lease_owner = $4, attempts = m.attempts + 1, updated_at = $1
    FROM picked WHERE m.id = picked.id
  RETURNING m.*`;

/**
 * Claims up to `limit` due messages for `node`, as leaseDueMessages does on SQLite: `sending`
 * ones whose lease ran out (their node died or hung) first, then queued or scheduled ones whose
 * time has come; paused projects skipped. Concurrent nodes never take the same message (see
 * above), and none waits for another's lease in progress. One transaction: the leases of one
 * call commit together.
 */
export async function leaseDueMessagesPostgres(pool: Pool, request: LeaseRequest): Promise<LeasedMessage[]> {
  const { node, now, leaseUntil, limit } = request;
  if (limit <= 0) return [];
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    try {
      const expired = (await client.query<MessageRowFromPostgres>(LEASE_EXPIRED, [now, leaseUntil, limit, node])).rows;
      const due = expired.length >= limit ? [] : (await client.query<MessageRowFromPostgres>(LEASE_DUE, [now, leaseUntil, limit - expired.length, node])).rows;
      await client.query('COMMIT');
      return [...expired, ...due].map(leasedMessage);
    } catch (err) {
      // A connection that cannot even roll back is not given back to the pool.
      await client.query('ROLLBACK').catch((rollbackErr: Error) => (broken = rollbackErr));
      throw err;
    }
  } finally {
    client.release(broken);
  }
}

export interface HandOffFinish extends HandOffEnd {
  id: string;
  /** The node that leased the message: only its lease may end it. */
  node: string;
  now: number;
}

/**
 * Ends a hand-off as finishSending does on SQLite (the same columns, the same values, the
 * lease cleared), but only while the message is still `sending` and leased by `node`: a node
 * whose lease ran out while it worked (it hung, then woke) finds the message taken by another
 * node and must not overwrite what that node will record. Returns whether the message moved.
 */
export async function finishHandOffPostgres(pool: Pool, finish: HandOffFinish): Promise<boolean> {
  const pending = finish.pending_recipients === undefined ? undefined : finish.pending_recipients === null ? null : JSON.stringify(finish.pending_recipients);
  const result = await pool.query(
    `UPDATE messages SET status = $3, next_attempt_at = $4::bigint, lease_until = NULL, lease_owner = NULL,
       provider_slug = COALESCE($5::text, provider_slug), provider_message_id = COALESCE($6::text, provider_message_id),
       last_error = $7::text, updated_at = $8::bigint,
       pending_recipients = CASE WHEN $9::boolean THEN pending_recipients ELSE $10::text END
     WHERE id = $1 AND status = 'sending' AND lease_owner = $2`,
    [
      finish.id,
      finish.node,
      finish.status,
      finish.next_attempt_at,
      finish.provider_slug ?? null,
      finish.provider_message_id ?? null,
      finish.last_error,
      finish.now,
      pending === undefined,
      pending ?? null,
    ],
  );
  return result.rowCount === 1;
}
