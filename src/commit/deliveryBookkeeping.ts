import {
  expiredMessages, failExpired, finishSending, insertAttempt, insertRecipientOutcome, leaseDueMessages, addProviderUsage, type AttemptRow, type RecipientStatus,
} from '../store/delivery.js';
import { insertMailEvent, type EventType } from '../store/events.js';
import type { MessageRow } from '../store/messages.js';
import { throttleAccount, throttledAccounts } from '../store/postgres/providerThrottles.js';
import type { Queries } from '../store/queries.js';
import { addSuppression, type SuppressionRow } from '../store/suppressions.js';

/** What a lifecycle event needs of its message. */
export interface MailRef {
  id: string;
  project_id: string;
  subject: string;
  from_email: string;
}

export interface MailEventRecord {
  message: MailRef;
  type: EventType;
  at: number;
  extra: Record<string, unknown>;
}

export type FinishSending = Parameters<typeof finishSending>[2];

/** One write of the delivery scheduler, decided on its side; run in order in one transaction. */
export type DeliveryWrite =
  | { kind: 'attempt'; attempt: AttemptRow }
  | { kind: 'recipient'; outcome: { message_id: string; email: string; status: RecipientStatus; reply: string | null; created_at: number } }
  | { kind: 'suppress'; suppression: SuppressionRow }
  | { kind: 'usage'; accountId: string; period: string }
  | { kind: 'event'; event: MailEventRecord }
  /** A provider asked to rest the account until `until` (PostgreSQL only: every node reads it). */
  | { kind: 'throttle'; accountId: string; until: number }
  /**
   * Ends a hand-off (only a message still `sending` moves; on PostgreSQL only while `node`
   * holds its lease); `event` is recorded only if it moved.
   */
  | { kind: 'finish'; id: string; to: FinishSending; at: number; event: MailEventRecord | null; node: string };

/**
 * One exchange of the delivery scheduler with the index: the outcomes it has to record, then
 * (optionally) the expiry sweep and a new lease of due messages, all in one transaction.
 */
export interface DeliveryBookkeeping {
  writes: DeliveryWrite[];
  /** Messages past their maximum age (created before `createdBefore`) end `failed`, at most `limit`. */
  expire: { createdBefore: number; at: number; limit: number } | null;
  /** `node`: the leasing node (node.id), the lease's owner on PostgreSQL. */
  lease: { node: string; now: number; leaseUntil: number; limit: number } | null;
}

export interface DeliveryBookkeepingResult {
  leased: MessageRow[];
  /**
   * PostgreSQL, with a lease: the accounts a provider rests now (any node was told), each with
   * its reset, read in the lease's transaction, so the leased messages' candidates skip them.
   */
  throttled: [accountId: string, until: number][];
}

export const mailRef = (row: MailRef): MailRef => ({ id: row.id, project_id: row.project_id, subject: row.subject, from_email: row.from_email });

/** Runs one exchange's writes; the caller wraps it in a transaction. */
export async function applyDeliveryBookkeeping(q: Queries, work: DeliveryBookkeeping): Promise<DeliveryBookkeepingResult> {
  const event = (e: MailEventRecord) => insertMailEvent(q, e.message, e.type, e.at, e.extra);
  for (const w of work.writes) {
    switch (w.kind) {
      case 'attempt':
        await insertAttempt(q, w.attempt);
        break;
      case 'recipient':
        await insertRecipientOutcome(q, w.outcome);
        break;
      case 'suppress':
        await addSuppression(q, w.suppression);
        break;
      case 'usage':
        await addProviderUsage(q, w.accountId, w.period);
        break;
      case 'event':
        await event(w.event);
        break;
      case 'throttle':
        if (q.dialect === 'postgres') await throttleAccount(q, w.accountId, w.until);
        break;
      case 'finish':
        if ((await finishSending(q, w.id, w.to, w.at, w.node)) && w.event) await event(w.event);
        break;
    }
  }
  if (work.expire) {
    const { createdBefore, at, limit } = work.expire;
    for (const row of await expiredMessages(q, createdBefore, limit)) {
      if (!(await failExpired(q, row.id, at))) continue;
      await event({ message: row, type: 'mail.failed', at, extra: { failure: { reason: 'expired', message: 'The message reached its maximum age before it could be sent.' } } });
    }
  }
  const lease = work.lease;
  const leased = lease ? await leaseDueMessages(q, lease.now, lease.leaseUntil, lease.limit, lease.node) : [];
  const throttled = lease && q.dialect === 'postgres' ? [...(await throttledAccounts(q, lease.now))] : [];
  return { leased, throttled };
}
