/**
 * The webhook dispatcher's cycle as bookkeeping: its types and fan-out plan live with the store's
 * outbox (store/webhookCycle.ts); each backend runs the cycle its own way (backendOf).
 */
import { backendOf } from '../store/backendOf.js';
import type { Queries } from '../store/queries.js';
import type { WebhookBookkeeping, WebhookBookkeepingResult } from '../store/webhookCycle.js';

export {
  fanOutPlan,
  type WebhookBookkeeping,
  type WebhookBookkeepingResult,
  type WebhookOutcomeRecord,
} from '../store/webhookCycle.js';

/**
 * PostgreSQL: whether committed events wait in the outbox's queue to be fanned out (several nodes
 * share it, with no cursor); SQLite has none (its dispatcher reads after its cursor).
 */
export async function fanOutQueued(q: Queries): Promise<boolean> {
  return backendOf(q).webhookOutbox.hasQueuedEvents(q);
}

/** Runs a dispatcher cycle's writes; the caller wraps it in a transaction. */
export function applyWebhookBookkeeping(
  q: Queries,
  work: WebhookBookkeeping,
): Promise<WebhookBookkeepingResult> {
  return backendOf(q).webhookOutbox.runCycle(q, work);
}
