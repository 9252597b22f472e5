import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import {
  applyFeedbackBookkeeping,
  type FeedbackBookkeeping,
  type FeedbackBookkeepingResult,
  type FeedbackTally,
} from '../commit/feedbackBookkeeping.js';
import { ContractError } from '../contract/errors.js';
import type { ProviderAccount } from '../contract/providerAccount.js';
import type { Logger } from '../log.js';
import { countFeedback } from '../platform/metrics.js';
import type { FeedbackItem } from '../providers/feedback.js';
import { receiptExists } from '../store/feedback.js';
import { findProviderAccount } from '../store/providerAccounts.js';
import type { Queries } from '../store/queries.js';

export type { FeedbackTally };

/** Reads on the event loop's connection; items are applied by the index writer thread (one transaction, flushed before the reply). */
export class FeedbackIntake {
  constructor(
    private readonly store: Queries,
    private readonly bookkeeping: Bookkeeping,
  ) {}

  /** Detached accounts still take feedback: their messages were sent before the detach. */
  account(id: string): Promise<ProviderAccount | undefined> {
    return findProviderAccount(this.store, id);
  }

  onceKeyUsed(accountId: string, key: string): Promise<boolean> {
    return receiptExists(this.store, accountId, key);
  }

  /** A once-key another request recorded meanwhile applies nothing: `feedback:replayed`. */
  async apply(
    account: ProviderAccount,
    items: FeedbackItem[],
    now: number,
    logger: Logger,
    onceKeys: string[] = [],
  ): Promise<FeedbackTally> {
    const { result } = await this.bookkeeping.write(
      'feedback',
      feedbackWork(account, items, now, onceKeys),
    );
    return settled(result, account, items, logger);
  }
}

/** For a process without the index writer (tests). */
export async function applyFeedback(
  q: Queries,
  account: ProviderAccount,
  items: FeedbackItem[],
  now: number,
  logger: Logger,
  onceKeys: string[] = [],
): Promise<FeedbackTally> {
  const work = feedbackWork(account, items, now, onceKeys);
  // IMMEDIATE: it reads before it writes, and a deferred transaction fails at once with SQLITE_BUSY instead of waiting.
  return settled(
    await q.transaction((tx) => applyFeedbackBookkeeping(tx, work)),
    account,
    items,
    logger,
  );
}

function feedbackWork(
  account: ProviderAccount,
  items: FeedbackItem[],
  now: number,
  onceKeys: string[],
): FeedbackBookkeeping {
  return {
    account: { id: account.id, project_id: account.project_id, slug: account.slug },
    items,
    now,
    onceKeys,
  };
}

function settled(
  result: FeedbackBookkeepingResult,
  account: ProviderAccount,
  items: FeedbackItem[],
  logger: Logger,
): FeedbackTally {
  if (result.replayed) throw new ContractError('feedback:replayed');
  for (const item of items) countFeedback(item.kind);
  for (const item of result.unknownItems) {
    // Acknowledged (providers retry otherwise) without a receipt: it may still apply later.
    logger.warn(
      {
        provider_account_id: account.id,
        slug: account.slug,
        provider_message_id: item.providerMessageId,
        kind: item.kind,
      },
      'provider feedback for an unknown message; acknowledged and ignored',
    );
  }
  return result.tally;
}
