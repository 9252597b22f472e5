import type { Queries } from '../queries.js';
import { insertWebhookAttempt, pruneWebhookAttempts } from '../webhookAttempts.js';
import {
  attemptRow,
  disableReason,
  type WebhookBookkeeping,
  type WebhookBookkeepingResult,
} from '../webhookCycle.js';
import { pruneWebhookDeliveries } from '../webhookDeliveries.js';
import { registeredWebhookEndpoints } from '../webhookEndpoints.js';
import {
  claimDueDeliveriesPostgres,
  fanOutEventsPostgres,
  recordWebhookOutcomesPostgres,
} from './webhookOutbox.js';

/**
 * The same cycle on PostgreSQL, where several nodes share the outbox (webhookOutbox.ts):
 * fan-out from the queue of committed events instead of a cursor, claims leased to this node,
 * outcomes recorded only for the deliveries it still holds. The fan-out comes first: it takes the
 * endpoint list's advisory lock (shared) before any delivery row is locked, as a registration or
 * a removal takes it (exclusively) before theirs, so the two never wait for each other in a circle.
 */
export async function runWebhookCycleShared(
  q: Queries,
  work: WebhookBookkeeping,
): Promise<WebhookBookkeepingResult> {
  const fannedOut =
    work.fanOutQueued > 0
      ? (await fanOutEventsPostgres(q, { now: work.now, limit: work.fanOutQueued })).events
      : 0;
  const outcomes = await recordWebhookOutcomesPostgres(q, {
    node: work.node,
    outcomes: work.outcomes,
    disableAfterMs: work.disableAfterMs,
    reason: (since, o) => disableReason(work.disableAfterMs, since, o.error),
  });
  // The delivery log shows the attempts whose outcome was recorded (a refused one is another node's now).
  const logged = new Set(outcomes.recorded);
  for (const o of work.outcomes) {
    if (!logged.delete(o.seq)) continue;
    await insertWebhookAttempt(q, attemptRow(o));
  }
  const endpoints = await registeredWebhookEndpoints(q);
  const { room, defaultRoom, minRoom, leaseUntil } = work.claims;
  const claimed: WebhookBookkeepingResult['claimed'] = [];
  for (const endpoint of endpoints) {
    const limit = room[endpoint.id] ?? defaultRoom;
    if (endpoint.disabled_at !== null || limit < minRoom) continue;
    const leased = await claimDueDeliveriesPostgres(q, {
      endpointId: endpoint.id,
      node: work.node,
      now: work.now,
      leaseUntil,
      limit,
    });
    if (leased.length > 0)
      claimed.push({ endpoint, rows: leased.map(({ lease_owner: _owner, ...row }) => row) });
  }
  const pruned = work.prune
    ? await pruneWebhookDeliveries(q, work.prune.before, work.prune.limit)
    : 0;
  if (work.prune) await pruneWebhookAttempts(q, work.prune.before, work.prune.limit);
  return { disabled: outcomes.disabled, recorded: outcomes.recorded, claimed, fannedOut, pruned };
}
