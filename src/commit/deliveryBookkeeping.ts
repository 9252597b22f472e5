import { backendOf } from '../store/backendOf.js';
import {
  type AttemptRow,
  addProviderUsage,
  expiredMessages,
  failExpired,
  finishSending,
  insertAttempt,
  insertRecipientOutcome,
  leaseDueMessages,
  type RecipientStatus,
} from '../store/delivery.js';
import { type EventType, insertMailEvent } from '../store/events.js';
import type { MessageRow } from '../store/messages.js';
import type { Queries } from '../store/queries.js';
import { addSuppression, type SuppressionRow } from '../store/suppressions.js';

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

/** What a hand-off records on the way (attempts, bounces, events, usage): written with its end. */
export type DeliveryRecord =
  | { kind: 'attempt'; attempt: AttemptRow }
  | {
      kind: 'recipient';
      outcome: {
        message_id: string;
        email: string;
        status: RecipientStatus;
        reply: string | null;
        created_at: number;
      };
    }
  | { kind: 'suppress'; suppression: SuppressionRow }
  | { kind: 'usage'; accountId: string; period: string }
  | { kind: 'event'; event: MailEventRecord };

/** Run in order in one transaction. */
export type DeliveryWrite =
  /** PostgreSQL only: every node reads it. */
  | { kind: 'throttle'; accountId: string; until: number }
  /**
   * Ends a hand-off (a message still `sending`; on PostgreSQL only while `node` holds its lease). `retried`: a commit
   * whose answer was cut off may have landed, so records are written only if the message moves (never a hand-off counted twice).
   */
  | {
      kind: 'finish';
      id: string;
      to: FinishSending;
      at: number;
      event: MailEventRecord | null;
      node: string;
      records: DeliveryRecord[];
      retried?: boolean;
    };

/** The outcomes, then optionally the expiry sweep and a new lease, in one transaction. */
export interface DeliveryBookkeeping {
  writes: DeliveryWrite[];
  expire: { createdBefore: number; at: number; limit: number } | null;
  lease: { node: string; now: number; leaseUntil: number; limit: number } | null;
  /** PostgreSQL: this node's own leases it holds no hand-off for, leased here again (a lease commit's answer may have been cut off). */
  reclaim: { node: string; now: number; leaseUntil: number; holding: string[] } | null;
}

export interface DeliveryBookkeepingResult {
  leased: MessageRow[];
  reclaimed: MessageRow[];
  /** PostgreSQL: the accounts resting now, read in the lease's transaction so the leased messages' candidates skip them. */
  throttled: [accountId: string, until: number][];
}

export const mailRef = (row: MailRef): MailRef => ({
  id: row.id,
  project_id: row.project_id,
  subject: row.subject,
  from_email: row.from_email,
});

/** The caller wraps it in a transaction. */
export async function applyDeliveryBookkeeping(
  q: Queries,
  work: DeliveryBookkeeping,
): Promise<DeliveryBookkeepingResult> {
  const leases = backendOf(q).deliveryLeases;
  const event = (e: MailEventRecord) => insertMailEvent(q, e.message, e.type, e.at, e.extra);
  for (const w of work.writes) {
    switch (w.kind) {
      case 'throttle':
        await leases.recordThrottle(q, w.accountId, w.until);
        break;
      case 'finish': {
        const moved = await finishSending(q, w.id, w.to, w.at, w.node);
        if (moved || !w.retried) for (const r of w.records) await applyRecord(q, r);
        if (moved && w.event) await event(w.event);
        break;
      }
    }
  }
  if (work.expire) {
    const { createdBefore, at, limit } = work.expire;
    for (const row of await expiredMessages(q, createdBefore, limit)) {
      if (!(await failExpired(q, row.id, at))) continue;
      await event({
        message: row,
        type: 'mail.failed',
        at,
        extra: {
          failure: {
            reason: 'expired',
            message: 'The message reached its maximum age before it could be sent.',
          },
        },
      });
    }
  }
  const reclaimed = work.reclaim ? await leases.reclaim(q, work.reclaim) : [];
  const lease = work.lease;
  const leased = lease
    ? await leaseDueMessages(q, lease.now, lease.leaseUntil, lease.limit, lease.node)
    : [];
  const throttled = lease ? await leases.restingAccounts(q, lease.now) : [];
  return { leased, reclaimed, throttled };
}

async function applyRecord(q: Queries, r: DeliveryRecord): Promise<void> {
  switch (r.kind) {
    case 'attempt':
      await insertAttempt(q, r.attempt);
      break;
    case 'recipient':
      await insertRecipientOutcome(q, r.outcome);
      break;
    case 'suppress':
      await addSuppression(q, r.suppression);
      break;
    case 'usage':
      await addProviderUsage(q, r.accountId, r.period);
      break;
    case 'event':
      await insertMailEvent(q, r.event.message, r.event.type, r.event.at, r.event.extra);
      break;
  }
}
