import type { FeedbackItem } from '../providers/feedback.js';
import { insertRecipientOutcome, recipientOutcomesFor } from '../store/delivery.js';
import { insertMailEvent } from '../store/events.js';
import {
  messageForFeedback,
  raiseMessageStatus,
  receiptExists,
  recordReceipt,
} from '../store/feedback.js';
import type { Queries } from '../store/queries.js';
import { addSuppression } from '../store/suppressions.js';

export interface FeedbackTally {
  received: number;
  applied: number;
  duplicates: number;
  unknown: number;
}

export interface FeedbackBookkeeping {
  account: { id: string; project_id: string; slug: string };
  items: FeedbackItem[];
  now: number;
  /** Recorded with the effects, or nothing applies. */
  onceKeys: string[];
}

export interface FeedbackBookkeepingResult {
  tally: FeedbackTally;
  replayed: boolean;
  unknownItems: Pick<FeedbackItem, 'providerMessageId' | 'kind'>[];
}

/** A later, milder notification must not overwrite them (a soft bounce after a hard one). */
const FINAL = new Set(['bounced', 'complained', 'failed', 'delivered']);

/** The caller wraps it in one transaction. Unknown messages get no receipt, so a notification that raced ahead can still apply. */
export async function applyFeedbackBookkeeping(
  q: Queries,
  work: FeedbackBookkeeping,
): Promise<FeedbackBookkeepingResult> {
  const { account, items, now, onceKeys } = work;
  const tally: FeedbackTally = { received: items.length, applied: 0, duplicates: 0, unknown: 0 };
  const unknownItems: FeedbackBookkeepingResult['unknownItems'] = [];
  for (const key of onceKeys)
    if (await receiptExists(q, account.id, key)) return { tally, replayed: true, unknownItems };
  for (const key of onceKeys) await recordReceipt(q, account.id, key, now);
  for (const item of items) {
    const message = await messageForFeedback(
      q,
      account.project_id,
      item.providerMessageId,
      item.messageId,
    );
    if (!message) {
      tally.unknown++;
      unknownItems.push({ providerMessageId: item.providerMessageId, kind: item.kind });
      continue;
    }
    if (!(await recordReceipt(q, account.id, item.receiptKey, now))) {
      tally.duplicates++;
      continue;
    }
    tally.applied++;
    const recipient = item.recipient;
    const reply = item.detail.reply ?? item.detail.code ?? item.detail.type ?? null;
    const previous = (await recipientOutcomesFor(q, message.id)).find(
      (o) => o.email.toLowerCase() === recipient.toLowerCase(),
    );
    const common = {
      recipient,
      provider: account.slug,
      provider_message_id: item.providerMessageId,
      occurred_at: new Date(item.occurredAt).toISOString(),
    };
    switch (item.kind) {
      case 'delivered':
        if (previous && FINAL.has(previous.status)) break;
        await insertRecipientOutcome(q, {
          message_id: message.id,
          email: recipient,
          status: 'delivered',
          reply,
          created_at: now,
        });
        await raiseMessageStatus(q, message.id, 'delivered', now);
        await insertMailEvent(q, message, 'mail.delivered', now, {
          delivery: { ...common, reply },
        });
        break;
      case 'soft_bounce':
        if (!previous || !FINAL.has(previous.status)) {
          await insertRecipientOutcome(q, {
            message_id: message.id,
            email: recipient,
            status: 'soft_bounced',
            reply,
            created_at: now,
          });
        }
        break;
      case 'hard_bounce':
        if (previous?.status === 'bounced' || previous?.status === 'complained') break;
        await insertRecipientOutcome(q, {
          message_id: message.id,
          email: recipient,
          status: 'bounced',
          reply,
          created_at: now,
        });
        await addSuppression(q, {
          project_id: message.project_id,
          email: recipient,
          reason: 'hard_bounce',
          created_at: now,
        });
        await raiseMessageStatus(q, message.id, 'bounced', now);
        await insertMailEvent(q, message, 'mail.bounced', now, {
          bounce: {
            ...common,
            type: 'hard',
            subtype: item.detail.subtype ?? item.detail.type ?? null,
            reply,
          },
        });
        break;
      case 'complaint':
        if (previous?.status === 'complained') break;
        await insertRecipientOutcome(q, {
          message_id: message.id,
          email: recipient,
          status: 'complained',
          reply,
          created_at: now,
        });
        await addSuppression(q, {
          project_id: message.project_id,
          email: recipient,
          reason: 'complaint',
          created_at: now,
        });
        await raiseMessageStatus(q, message.id, 'complained', now);
        await insertMailEvent(q, message, 'mail.complained', now, {
          complaint: { ...common, feedback_type: item.detail.type ?? null },
        });
        break;
      case 'failed':
        await insertRecipientOutcome(q, {
          message_id: message.id,
          email: recipient,
          status: 'failed',
          reply,
          created_at: now,
        });
        await raiseMessageStatus(q, message.id, 'failed', now);
        await insertMailEvent(q, message, 'mail.failed', now, {
          failure: { reason: 'provider_rejected', message: reply, ...common },
        });
        break;
    }
  }
  return { tally, replayed: false, unknownItems };
}
