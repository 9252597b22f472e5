import { newDeliveryId } from '../ids.js';
import {
  claimDueDeliveries, insertWebhookDelivery, markEndpointFailure, markEndpointSuccess, newPendingDelivery, pruneWebhookDeliveries, recordAttemptFailed,
  recordDelivered, registeredWebhookEndpoints, setWebhookCursor, type ClaimedDelivery, type OutboxEventHead, type WebhookEndpointRow,
} from '../store/webhooks.js';
import type { Queries } from '../store/queries.js';
import { insertWebhookAttempt, pruneWebhookAttempts } from '../store/webhookAttempts.js';
import { claimDueDeliveriesPostgres, fanOutEventsPostgres, hasQueuedEventsPostgres, recordWebhookOutcomesPostgres } from '../store/postgres/webhookOutbox.js';

/** One attempt's outcome, with everything the ladder decided already worked out by the dispatcher. */
export interface WebhookOutcomeRecord {
  seq: number;
  endpointId: string;
  at: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  /** After a failure: when the next attempt is due; null: failed for good. */
  nextAttemptAt: number | null;
  /** Whether a failure counts in the endpoint's failure run (not one no retry could help: the event is gone). */
  countsAgainstEndpoint: boolean;
  /** For the endpoint's delivery log: the delivery (`we.…`), its event type, which attempt this was, how long it took. */
  deliveryId: string;
  type: string;
  attempt: number;
  durationMs: number;
}

/**
 * Everything one dispatcher cycle writes, as plain data: it is run in one transaction either
 * on the dispatcher's own connection or by the index writer thread (the index's one writer, so
 * the dispatcher, at idle priority, never holds the write lock acceptance waits for).
 */
export interface WebhookBookkeeping {
  now: number;
  outcomes: WebhookOutcomeRecord[];
  /** An endpoint failing this long is disabled. */
  disableAfterMs: number;
  /** Events to fan out: a delivery row per endpoint that wants each (decided inside the transaction). */
  fanOut: OutboxEventHead[];
  /** The cursor to store: past `fanOut`, or moved over events no endpoint wanted. Null: unchanged. */
  cursor: number | null;
  /** PostgreSQL (no cursor): queued events to take off webhook_fanout_pending and fan out, at most (0: none). */
  fanOutQueued: number;
  /** PostgreSQL: this node (node.id), the owner of the leases its claims take; only its own leases' outcomes are recorded. */
  node: string;
  /** Claims: per endpoint, how many more it can hold (`defaultRoom` for one not listed); one with less than `minRoom` claims nothing. */
  claims: { room: Record<string, number>; defaultRoom: number; minRoom: number; leaseUntil: number };
  /** Finished deliveries to prune: completed before `before`, at most `limit`. */
  prune: { before: number; limit: number } | null;
}

export interface WebhookBookkeepingResult {
  disabled: { endpoint: string; reason: string }[];
  /** PostgreSQL: the deliveries whose outcome was recorded (the others were another node's by then); null: every outcome given (SQLite). */
  recorded: number[] | null;
  claimed: { endpoint: WebhookEndpointRow; rows: ClaimedDelivery[] }[];
  fannedOut: number;
  pruned: number;
}

/**
 * PostgreSQL: whether committed events wait in the outbox's queue to be fanned out (several nodes
 * share it, with no cursor); SQLite has none (its dispatcher reads after its cursor).
 */
export async function fanOutQueued(q: Queries): Promise<boolean> {
  return q.dialect === 'postgres' && hasQueuedEventsPostgres(q);
}

/** Runs a dispatcher cycle's writes; the caller wraps it in a transaction. */
export async function applyWebhookBookkeeping(q: Queries, work: WebhookBookkeeping): Promise<WebhookBookkeepingResult> {
  if (q.dialect === 'postgres') return applyWebhookBookkeepingPostgres(q, work);
  const disabled = await applyOutcomes(q, work.outcomes, work.disableAfterMs);
  // Endpoints read inside the write transaction: one removed a moment ago gets no new rows,
  // and one registered since wants none of these events (its from_seq is newer).
  const endpoints = await registeredWebhookEndpoints(q);
  let fannedOut = 0;
  if (work.fanOut.length > 0) {
    for (const row of fanOutPlan(endpoints, work.fanOut)) await insertWebhookDelivery(q, newPendingDelivery(newDeliveryId(), row.endpointId, row.event, work.now));
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
  const pruned = work.prune ? await pruneWebhookDeliveries(q, work.prune.before, work.prune.limit) : 0;
  if (work.prune) await pruneWebhookAttempts(q, work.prune.before, work.prune.limit);
  return { disabled, recorded: null, claimed, fannedOut, pruned };
}

/**
 * The same cycle on PostgreSQL, where several nodes share the outbox (store/postgres/webhookOutbox.ts):
 * fan-out from the queue of committed events instead of a cursor, claims leased to this node,
 * outcomes recorded only for the deliveries it still holds. The fan-out comes first: it takes the
 * endpoint list's advisory lock (shared) before any delivery row is locked, as a registration or
 * a removal takes it (exclusively) before theirs, so the two never wait for each other in a circle.
 */
async function applyWebhookBookkeepingPostgres(q: Queries, work: WebhookBookkeeping): Promise<WebhookBookkeepingResult> {
  const fannedOut = work.fanOutQueued > 0 ? (await fanOutEventsPostgres(q, { now: work.now, limit: work.fanOutQueued })).events : 0;
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
    const leased = await claimDueDeliveriesPostgres(q, { endpointId: endpoint.id, node: work.node, now: work.now, leaseUntil, limit });
    if (leased.length > 0) claimed.push({ endpoint, rows: leased.map(({ lease_owner: _owner, ...row }) => row) });
  }
  const pruned = work.prune ? await pruneWebhookDeliveries(q, work.prune.before, work.prune.limit) : 0;
  if (work.prune) await pruneWebhookAttempts(q, work.prune.before, work.prune.limit);
  return { disabled: outcomes.disabled, recorded: outcomes.recorded, claimed, fannedOut, pruned };
}

/** An outcome as the endpoint's delivery log keeps it. */
function attemptRow(o: WebhookOutcomeRecord): Parameters<typeof insertWebhookAttempt>[1] {
  return {
    delivery_id: o.deliveryId,
    endpoint_id: o.endpointId,
    type: o.type,
    attempt: o.attempt,
    attempted_at: o.at - o.durationMs,
    ok: o.ok ? 1 : 0,
    status_code: o.status,
    duration_ms: o.durationMs,
    error: o.error,
  };
}

function disableReason(disableAfterMs: number, since: number, error: string | null): string {
  return `every attempt failed for ${formatDuration(disableAfterMs)} (since ${new Date(since).toISOString()}); last: ${error ?? 'unknown error'}`;
}

/** The delivery rows a batch of events makes: one per (event, endpoint of its project that wants its type and is newer than it). */
export function fanOutPlan(endpoints: WebhookEndpointRow[], events: OutboxEventHead[]): { endpointId: string; event: OutboxEventHead }[] {
  if (endpoints.length === 0) return [];
  const byProject = new Map<string, { endpoint: WebhookEndpointRow; types: Set<string> | null }[]>();
  for (const e of endpoints) {
    const list = byProject.get(e.project_id) ?? [];
    list.push({ endpoint: e, types: e.event_types === null ? null : new Set(JSON.parse(e.event_types) as string[]) });
    byProject.set(e.project_id, list);
  }
  const rows: { endpointId: string; event: OutboxEventHead }[] = [];
  for (const ev of events) {
    for (const { endpoint, types } of byProject.get(ev.project_id) ?? []) {
      if (ev.seq <= endpoint.from_seq) continue;
      if (types !== null && !types.has(ev.type)) continue;
      rows.push({ endpointId: endpoint.id, event: ev });
    }
  }
  return rows;
}

/** Records outcomes; returns the endpoints this disabled (and why). */
async function applyOutcomes(q: Queries, outcomes: WebhookOutcomeRecord[], disableAfterMs: number): Promise<{ endpoint: string; reason: string }[]> {
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

function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}
