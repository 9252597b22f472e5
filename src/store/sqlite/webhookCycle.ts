import { newDeliveryId } from '../../ids.js';
import { setWebhookCursor } from '../eventOutbox.js';
import type { Queries } from '../queries.js';
import { insertWebhookAttempt, pruneWebhookAttempts } from '../webhookAttempts.js';
import {
  attemptRow,
  disableReason,
  fanOutPlan,
  type WebhookBookkeeping,
  type WebhookBookkeepingResult,
  type WebhookOutcomeRecord,
} from '../webhookCycle.js';
import {
  claimDueDeliveries,
  insertWebhookDelivery,
  newPendingDelivery,
  pruneWebhookDeliveries,
  recordAttemptFailed,
  recordDelivered,
} from '../webhookDeliveries.js';
import {
  markEndpointFailure,
  markEndpointSuccess,
  registeredWebhookEndpoints,
} from '../webhookEndpoints.js';

/**
 * A dispatcher cycle on the one node's index: fan-out along the cursor over events.seq (SQLite's
 * seqs commit in order), outcomes, then claims; the caller wraps it in a transaction.
 */
export async function runWebhookCycleSqlite(
  q: Queries,
  work: WebhookBookkeeping,
): Promise<WebhookBookkeepingResult> {
  const disabled = await applyOutcomes(q, work.outcomes, work.disableAfterMs);
  // Endpoints read inside the write transaction: one removed a moment ago gets no new rows,
  // and one registered since wants none of these events (its from_seq is newer).
  const endpoints = await registeredWebhookEndpoints(q);
  let fannedOut = 0;
  if (work.fanOut.length > 0) {
    for (const row of fanOutPlan(endpoints, work.fanOut))
      await insertWebhookDelivery(
        q,
        newPendingDelivery(newDeliveryId(), row.endpointId, row.event, work.now),
      );
    fannedOut = work.fanOut.length;
  }
  if (work.cursor !== null) await setWebhookCursor(q, work.cursor);
  const { room, defaultRoom, minRoom, leaseUntil } = work.claims;
  const claimed: WebhookBookkeepingResult['claimed'] = [];
  for (const endpoint of endpoints) {
    const limit = room[endpoint.id] ?? defaultRoom;
    if (endpoint.disabled_at !== null || limit < minRoom) continue;
    const rows = await claimDueDeliveries(q, endpoint.id, work.now, leaseUntil, limit);
    if (rows.length > 0) claimed.push({ endpoint, rows });
  }
  const pruned = work.prune
    ? await pruneWebhookDeliveries(q, work.prune.before, work.prune.limit)
    : 0;
  if (work.prune) await pruneWebhookAttempts(q, work.prune.before, work.prune.limit);
  return { disabled, recorded: null, claimed, fannedOut, pruned };
}

/** Records outcomes; returns the endpoints this disabled (and why). */
async function applyOutcomes(
  q: Queries,
  outcomes: WebhookOutcomeRecord[],
  disableAfterMs: number,
): Promise<{ endpoint: string; reason: string }[]> {
  const disabled: { endpoint: string; reason: string }[] = [];
  // An endpoint's health is written once per run of successes (the latest one), in order with its failures.
  const successes = new Map<string, number>();
  const flushSuccess = async (endpointId: string) => {
    const at = successes.get(endpointId);
    if (at === undefined) return;
    await markEndpointSuccess(q, endpointId, at);
    successes.delete(endpointId);
  };
  for (const o of outcomes) {
    const record = { seq: o.seq, at: o.at, status: o.status, error: o.error };
    await insertWebhookAttempt(q, attemptRow(o));
    if (o.ok) {
      await recordDelivered(q, record);
      successes.set(o.endpointId, Math.max(successes.get(o.endpointId) ?? 0, o.at));
      continue;
    }
    await flushSuccess(o.endpointId);
    await recordAttemptFailed(q, record, o.nextAttemptAt);
    if (!o.countsAgainstEndpoint) continue;
    const reason = (since: number) => disableReason(disableAfterMs, since, o.error);
    const disabledFor = await markEndpointFailure(q, o.endpointId, o.at, disableAfterMs, reason);
    if (disabledFor !== null) disabled.push({ endpoint: o.endpointId, reason: disabledFor });
  }
  for (const endpointId of [...successes.keys()]) await flushSuccess(endpointId);
  return disabled;
}
