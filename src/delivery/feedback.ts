import { ContractError } from '../contract/errors.js';
import type { ProviderAccount } from '../contract/providerAccount.js';
import type { Logger } from '../log.js';
import type { FeedbackItem } from '../providers/feedback.js';
import type { Db } from '../store/db.js';
import { insertRecipientOutcome, recipientOutcomesFor } from '../store/delivery.js';
import { insertMailEvent } from '../store/events.js';
import { messageForFeedback, raiseMessageStatus, recordReceipt } from '../store/feedback.js';
import { addSuppression } from '../store/suppressions.js';

export interface FeedbackTally {
  received: number;
  applied: number;
  duplicates: number;
  unknown: number;
}

/** Outcomes that a later, milder notification must not overwrite (a soft bounce after a hard one). */
const FINAL = new Set(['bounced', 'complained', 'failed', 'delivered']);

/**
 * Applies verified provider feedback in one transaction: each item once (by receipt key),
 * matched to the message by provider message id, turned into the recipient's outcome, the
 * message's status, a lifecycle event and, for hard bounces and complaints, a suppression.
 * Items whose message is unknown are logged and acknowledged (providers retry otherwise),
 * without a receipt, so a notification that raced ahead of our bookkeeping can still apply.
 * `onceKeys` (signature tokens the verifier saw unused) are recorded first; if another request
 * recorded one meanwhile, nothing is applied (`feedback:replayed`, the transaction rolls back).
 */
export function applyFeedback(
  db: Db,
  account: ProviderAccount,
  items: FeedbackItem[],
  now: number,
  logger: Logger,
  onceKeys: string[] = [],
): FeedbackTally {
  const tally: FeedbackTally = { received: items.length, applied: 0, duplicates: 0, unknown: 0 };
  // IMMEDIATE: it reads before it writes, and a deferred transaction whose snapshot another
  // connection has committed past fails at once with SQLITE_BUSY instead of waiting.
  return db.transaction((): FeedbackTally => {
    // The notification's one-time keys commit with its effects, or not at all.
    for (const key of onceKeys) {
      if (!recordReceipt(db, account.id, key, now)) throw new ContractError('feedback:replayed');
    }
    for (const item of items) {
      const message = messageForFeedback(db, account.project_id, item.providerMessageId, item.messageId);
      if (!message) {
        tally.unknown++;
        logger.warn(
          { provider_account_id: account.id, slug: account.slug, provider_message_id: item.providerMessageId, kind: item.kind },
          'provider feedback for an unknown message; acknowledged and ignored',
        );
        continue;
      }
      if (!recordReceipt(db, account.id, item.receiptKey, now)) {
        tally.duplicates++;
        continue;
      }
      tally.applied++;
      const recipient = item.recipient;
      const reply = item.detail.reply ?? item.detail.code ?? item.detail.type ?? null;
      const previous = recipientOutcomesFor(db, message.id).find((o) => o.email.toLowerCase() === recipient.toLowerCase());
      const common = { recipient, provider: account.slug, provider_message_id: item.providerMessageId, occurred_at: new Date(item.occurredAt).toISOString() };
      switch (item.kind) {
        case 'delivered':
          if (previous && FINAL.has(previous.status)) break;
          insertRecipientOutcome(db, { message_id: message.id, email: recipient, status: 'delivered', reply, created_at: now });
          raiseMessageStatus(db, message.id, 'delivered', now);
          insertMailEvent(db, message, 'mail.delivered', now, { delivery: { ...common, reply } });
          break;
        case 'soft_bounce':
          if (!previous || !FINAL.has(previous.status)) {
            insertRecipientOutcome(db, { message_id: message.id, email: recipient, status: 'soft_bounced', reply, created_at: now });
          }
          break;
        case 'hard_bounce':
          if (previous?.status === 'bounced' || previous?.status === 'complained') break;
          insertRecipientOutcome(db, { message_id: message.id, email: recipient, status: 'bounced', reply, created_at: now });
          addSuppression(db, { project_id: message.project_id, email: recipient, reason: 'hard_bounce', created_at: now });
          raiseMessageStatus(db, message.id, 'bounced', now);
          insertMailEvent(db, message, 'mail.bounced', now, { bounce: { ...common, type: 'hard', subtype: item.detail.subtype ?? item.detail.type ?? null, reply } });
          break;
        case 'complaint':
          if (previous?.status === 'complained') break;
          insertRecipientOutcome(db, { message_id: message.id, email: recipient, status: 'complained', reply, created_at: now });
          addSuppression(db, { project_id: message.project_id, email: recipient, reason: 'complaint', created_at: now });
          raiseMessageStatus(db, message.id, 'complained', now);
          insertMailEvent(db, message, 'mail.complained', now, { complaint: { ...common, feedback_type: item.detail.type ?? null } });
          break;
        case 'failed':
          insertRecipientOutcome(db, { message_id: message.id, email: recipient, status: 'failed', reply, created_at: now });
          raiseMessageStatus(db, message.id, 'failed', now);
          insertMailEvent(db, message, 'mail.failed', now, { failure: { reason: 'provider_rejected', message: reply, ...common } });
          break;
      }
    }
    return tally;
  }).immediate();
}
