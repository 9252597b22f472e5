import { newDeliveryId } from '../../ids.js';
import type { Queries } from '../queries.js';
import type { ClaimedDelivery } from '../webhookDeliveries.js';
import type { WebhookEndpointRow } from '../webhookEndpoints.js';

/**
 * The webhook outbox on PostgreSQL, shared by several nodes: the twins of SQLite's
 * fan-out (webhookCursor, eventsAfter, setWebhookCursor), claimDueDeliveries, recordDelivered /
 * recordAttemptFailed and markEndpointSuccess / markEndpointFailure, plus endpoint registration
 * and removal, which must agree with the fan-out (see ENDPOINT_LIST_LOCK). Written against
 * `Queries` with dialect 'postgres'; each function runs in the caller's transaction when given
 * one (its own becomes a savepoint), so a dispatcher cycle can still commit as one: the
 * dispatcher's cycle on PostgreSQL (webhookCycle.ts here) and the operator's endpoint
 * writes (commit/operatorWrites.ts) use these.
 *
 * FAN-OUT: a queue of pending events, not a cursor.
 * SQLite's one cursor over events.seq is exact because its seqs commit in order. Here a
 * transaction holding seq 100 may commit after one holding 101, and a cursor past 101 never
 * sees 100. Of the two known cures this module takes the first:
 *
 * (a) Taken: migration 12's trigger queues every inserted event in webhook_fanout_pending, in the
 *     event's own transaction (the two commit or roll back together). Whichever node fans out
 *     takes a batch of queued rows FOR UPDATE SKIP LOCKED and deletes them in the transaction
 *     that inserts their deliveries. An event becomes takeable exactly when it commits, whatever
 *     its seq; a row is taken by one node (another skips it while it is locked, and no longer
 *     sees it once the delete commits); a node that dies mid-way rolls back the delete with the
 *     deliveries. Nodes fan out in parallel, each its own batch.
 * (b) Not taken: a cursor over (pg_current_xact_id(), seq), reading only events of transactions
 *     older than pg_snapshot_xmin(pg_current_snapshot()). Exact too, and cheaper per event: an
 *     xid8 column and one index entry (about 1 µs per event on PostgreSQL 15, against about 4 µs
 *     for the trigger's row and 3 µs more to delete it at fan-out; both small beside what the
 *     acceptance commit already writes per message: its row and indexes, body, counters, and the
 *     round trips). But that xmin is the oldest running transaction holding an xid in the whole
 *     server, every database on it included: one long write transaction anywhere (another
 *     application's batch job, a session left idle in transaction, a forgotten prepared
 *     transaction, a large body streaming into an acceptance commit) holds back every webhook of
 *     every node until it ends, and nothing in Postern shows why. It also funnels the fan-out
 *     through one cursor row, one node at a time.
 * Retention: the queue holds only the backlog (rows are deleted as they are fanned out), so it
 * grows with fan-out lag, not with the events retention keeps, where (b)'s (xid, seq) index would
 * hold an entry per retained event. Pruning events needs no change: the queue has no foreign key,
 * and an event pruned before its fan-out leaves a row that is taken and dropped with no
 * deliveries, as SQLite's cursor passes a gap.
 */

/**
 * The advisory lock that orders fan-out against endpoint registration and removal (an arbitrary
 * constant of Postern's: "PSTNWH"; migrations use "PSTN"). A fan-out holds it shared, so nodes
 * fan out together; registering or removing an endpoint holds it exclusively, so it waits for
 * the fan-outs under way and the next ones wait for it. Then:
 * - an endpoint registered before a fan-out took its lock is read by that fan-out; one registered
 *   after it computes its from_seq (the newest committed event) from a snapshot that sees every
 *   event that fan-out took, so it never wanted them: none is missed for the new endpoint;
 * - a removal cancels the pending deliveries of every fan-out before it (its statements read
 *   after they committed), and no fan-out after it sees the endpoint: none is left pending for a
 *   removed endpoint.
 * Without it, READ COMMITTED lets a fan-out read the endpoint list while a registration or a
 * removal is committing, and either miss an event or add deliveries after the removal cancelled.
 */
export const ENDPOINT_LIST_LOCK = 0x5053544e5748;

function postgresOnly(q: Queries, what: string): void {
  if (q.dialect !== 'postgres')
    throw new Error(
      `${what} is PostgreSQL's (row locks, SKIP LOCKED); SQLite uses store/webhookDeliveries.ts`,
    );
}

// ------------------------------------------------------------------------------------------
// Fan-out
// ------------------------------------------------------------------------------------------

export interface FanOutRequest {
  now: number;
  /** Queued events taken at most (the dispatcher's batch_size). */
  limit: number;
}

export interface FanOutResult {
  /** Queued events taken (and dropped from the queue); fewer than `limit`: nothing more is free now. */
  events: number;
  /** Delivery rows inserted for them. */
  deliveries: number;
}

/** An event taken off the queue; project_id and type are null when retention pruned the event first. */
interface TakenEvent {
  seq: number;
  project_id: string | null;
  type: string | null;
}

type FanOutEndpoint = Pick<WebhookEndpointRow, 'id' | 'project_id' | 'event_types' | 'from_seq'>;

/*
 * Locked in a MATERIALIZED CTE (the rows and LIMIT fixed once), deleted, and joined to their
 * events. A row another node holds is skipped, not waited for; one another node deleted since
 * this statement's snapshot is found deleted when locked and dropped (READ COMMITTED).
 */
const TAKE_QUEUED_EVENTS = `
  WITH taken AS MATERIALIZED (
    SELECT event_seq FROM webhook_fanout_pending
     ORDER BY event_seq
     LIMIT @limit
     FOR UPDATE SKIP LOCKED
  ), dropped AS (
    DELETE FROM webhook_fanout_pending p USING taken WHERE p.event_seq = taken.event_seq RETURNING p.event_seq
  )
  SELECT dropped.event_seq AS seq, e.project_id, e.type
    FROM dropped LEFT JOIN events e ON e.seq = dropped.event_seq
   ORDER BY dropped.event_seq`;

/** One statement for the batch; ordered so delivery seqs follow event seqs. */
const INSERT_DELIVERIES = `
  INSERT INTO webhook_deliveries (id, endpoint_id, event_seq, type, status, attempts, next_attempt_at, created_at)
  SELECT r.id, r.endpoint_id, r.event_seq, r.type, 'pending', 0, @now::bigint, @now::bigint
    FROM json_to_recordset(@rows::json) AS r(id text, endpoint_id text, event_seq bigint, type text, n integer)
   ORDER BY r.n`;

/**
 * Fans out up to `limit` committed events, oldest queued first: one `webhook_deliveries` row
 * per registered endpoint (enabled or not, as on SQLite) of the event's project that wants its
 * type and is newer than it (seq > from_seq). Safe with any number of nodes at once: each event
 * is fanned out exactly once (see the module comment), whatever order its transaction committed in.
 */
export async function fanOutEventsPostgres(
  q: Queries,
  request: FanOutRequest,
): Promise<FanOutResult> {
  postgresOnly(q, 'fanOutEventsPostgres');
  if (request.limit <= 0) return { events: 0, deliveries: 0 };
  return q.transaction(async (tx) => {
    // First, before anything is read: the endpoint list cannot change until this commits.
    await tx.get('SELECT pg_advisory_xact_lock_shared(@key)', { key: ENDPOINT_LIST_LOCK });
    const events = await tx.all<TakenEvent>(TAKE_QUEUED_EVENTS, { limit: request.limit });
    if (events.length === 0) return { events: 0, deliveries: 0 };
    const endpoints = await tx.all<FanOutEndpoint>(
      'SELECT id, project_id, event_types, from_seq FROM webhook_endpoints WHERE removed_at IS NULL ORDER BY created_at, id',
    );
    const rows = deliveryRows(endpoints, events, request.now);
    if (rows.length > 0)
      await tx.run(INSERT_DELIVERIES, { rows: JSON.stringify(rows), now: request.now });
    return { events: events.length, deliveries: rows.length };
  });
}

interface NewDeliveryRow {
  id: string;
  endpoint_id: string;
  event_seq: number;
  type: string;
  n: number;
}

/** The rule of store/webhookCycle.ts's fanOutPlan, in SQL. */
function deliveryRows(
  endpoints: FanOutEndpoint[],
  events: TakenEvent[],
  now: number,
): NewDeliveryRow[] {
  const byProject = new Map<string, { endpoint: FanOutEndpoint; types: Set<string> | null }[]>();
  for (const e of endpoints) {
    const list = byProject.get(e.project_id) ?? [];
    list.push({
      endpoint: e,
      types: e.event_types === null ? null : new Set(JSON.parse(e.event_types) as string[]),
    });
    byProject.set(e.project_id, list);
  }
  const rows: NewDeliveryRow[] = [];
  for (const ev of events) {
    if (ev.project_id === null || ev.type === null) continue;
    for (const { endpoint, types } of byProject.get(ev.project_id) ?? []) {
      if (ev.seq <= endpoint.from_seq) continue;
      if (types !== null && !types.has(ev.type)) continue;
      rows.push({
        id: newDeliveryId(now),
        endpoint_id: endpoint.id,
        event_seq: ev.seq,
        type: ev.type,
        n: rows.length,
      });
    }
  }
  return rows;
}

/** Whether any event waits for fan-out (an index probe; rows another node is taking count too). */
export async function hasQueuedEventsPostgres(q: Queries): Promise<boolean> {
  postgresOnly(q, 'hasQueuedEventsPostgres');
  const row = await q.get<{ queued: number }>(
    'SELECT EXISTS (SELECT 1 FROM webhook_fanout_pending) AS queued',
  );
  return row?.queued === 1;
}

// ------------------------------------------------------------------------------------------
// Endpoint registration and removal (under ENDPOINT_LIST_LOCK, against the fan-out)
// ------------------------------------------------------------------------------------------

/** insertWebhookEndpoint's twin: only events committed after it are delivered (from_seq), none missed. */
export async function insertWebhookEndpointPostgres(
  q: Queries,
  row: Pick<
    WebhookEndpointRow,
    'id' | 'project_id' | 'url' | 'event_types' | 'secret' | 'created_at'
  >,
): Promise<WebhookEndpointRow> {
  postgresOnly(q, 'insertWebhookEndpointPostgres');
  return q.transaction(async (tx) => {
    await tx.get('SELECT pg_advisory_xact_lock(@key)', { key: ENDPOINT_LIST_LOCK });
    // A statement begun after the lock: its snapshot sees every event the fan-outs before it took.
    await tx.run(
      `INSERT INTO webhook_endpoints (id, project_id, url, event_types, secret, from_seq, created_at)
       VALUES (@id, @project_id, @url, @event_types, @secret, (SELECT COALESCE(MAX(seq), 0) FROM events), @created_at)`,
      row,
    );
    return (await tx.get<WebhookEndpointRow>('SELECT * FROM webhook_endpoints WHERE id = @id', {
      id: row.id,
    }))!;
  });
}

/** removeWebhookEndpoint's twin: its pending deliveries end `failed` (`endpoint removed`), its leases with them. */
export async function removeWebhookEndpointPostgres(
  q: Queries,
  id: string,
  now: number,
): Promise<{ removed: boolean; cancelled: number }> {
  postgresOnly(q, 'removeWebhookEndpointPostgres');
  return q.transaction(async (tx) => {
    await tx.get('SELECT pg_advisory_xact_lock(@key)', { key: ENDPOINT_LIST_LOCK });
    const found = await tx.get<{ id: string }>(
      'SELECT id FROM webhook_endpoints WHERE id = @id AND removed_at IS NULL',
      { id },
    );
    if (!found) return { removed: false, cancelled: 0 };
    // Deliveries before the endpoint's row, each set in seq order: the order outcome recording
    // takes its locks in, so the two never wait for each other in a circle.
    const cancelled = await tx.run(
      `WITH locked AS MATERIALIZED (
         SELECT seq FROM webhook_deliveries WHERE endpoint_id = @id AND status = 'pending' ORDER BY seq FOR UPDATE
       )
       UPDATE webhook_deliveries d
          SET status = 'failed', next_attempt_at = NULL, last_error = 'endpoint removed', completed_at = @now::bigint, lease_owner = NULL
         FROM locked WHERE d.seq = locked.seq AND d.status = 'pending'`,
      { id, now },
    );
    await tx.run(
      'UPDATE webhook_endpoints SET removed_at = @now::bigint WHERE id = @id AND removed_at IS NULL',
      { id, now },
    );
    return { removed: true, cancelled };
  });
}

// ------------------------------------------------------------------------------------------
// Claims
// ------------------------------------------------------------------------------------------

export interface DeliveryClaimRequest {
  endpointId: string;
  /** The claiming node's id (node.id): recorded as the lease's owner. */
  node: string;
  now: number;
  leaseUntil: number;
  limit: number;
}

/** A claimed delivery and the node now holding its lease. */
export type LeasedDelivery = ClaimedDelivery & { lease_owner: string };

/*
 * As deliveryLeases.ts leases messages: rows picked FOR UPDATE SKIP LOCKED in a MATERIALIZED
 * CTE (another node's claim in progress is passed over, not waited for; a row it claimed and
 * committed since this statement's snapshot is re-read once locked and dropped, its due time now
 * in the future), then updated. The lease is SQLite's: the due time pushed to the lease's end, so
 * a dead node's claims are due again then and any node takes them; plus the owner.
 */
const CLAIM_DUE_DELIVERIES = `
  WITH picked AS MATERIALIZED (
    SELECT seq, next_attempt_at AS due FROM webhook_deliveries
     WHERE endpoint_id = @endpoint AND status = 'pending' AND next_attempt_at <= @now
     ORDER BY next_attempt_at, seq
     LIMIT @limit
     FOR UPDATE SKIP LOCKED
  ), claimed AS (
    UPDATE webhook_deliveries d SET next_attempt_at = @lease, lease_owner = @node
      FROM picked WHERE d.seq = picked.seq
    RETURNING d.seq, d.id, d.endpoint_id, d.event_seq, d.type, d.attempts, d.lease_owner
  )
  SELECT claimed.* FROM claimed JOIN picked ON picked.seq = claimed.seq ORDER BY picked.due, picked.seq`;

/**
 * claimDueDeliveries' twin: up to `limit` due deliveries of one endpoint, oldest due first,
 * leased to `node` until `leaseUntil`. Concurrent nodes never claim the same delivery while its
 * lease runs; one whose lease ran out (its node died or hung) is due and claimed anew.
 */
export async function claimDueDeliveriesPostgres(
  q: Queries,
  request: DeliveryClaimRequest,
): Promise<LeasedDelivery[]> {
  postgresOnly(q, 'claimDueDeliveriesPostgres');
  if (request.limit <= 0) return [];
  return q.all<LeasedDelivery>(CLAIM_DUE_DELIVERIES, {
    endpoint: request.endpointId,
    now: request.now,
    limit: request.limit,
    lease: request.leaseUntil,
    node: request.node,
  });
}

// ------------------------------------------------------------------------------------------
// Outcomes
// ------------------------------------------------------------------------------------------

/** One attempt's outcome for its delivery, the ladder's decision made (AttemptRecord plus the verdict). */
export interface DeliveryOutcome {
  /** The delivery (webhook_deliveries.seq). */
  seq: number;
  at: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  /** After a failure: when the next attempt is due; null: failed for good. Unused on success. */
  nextAttemptAt: number | null;
}

/*
 * The rows still pending and leased by this node are locked first, in seq order (as a removal
 * locks its cancellations), then updated with recordDelivered's or recordAttemptFailed's values;
 * the lease ends with the outcome. A row another node claimed since, or whose outcome is already
 * recorded, is not locked and not touched.
 */
const RECORD_OUTCOMES = `
  WITH outcome AS MATERIALIZED (
    SELECT * FROM json_to_recordset(@outcomes::json) AS o(seq bigint, at bigint, ok boolean, status integer, error text, next bigint)
  ), locked AS MATERIALIZED (
    SELECT d.seq FROM webhook_deliveries d
     WHERE d.seq IN (SELECT seq FROM outcome) AND d.status = 'pending' AND d.lease_owner = @node
     ORDER BY d.seq
     FOR UPDATE
  )
  UPDATE webhook_deliveries d
     SET status = CASE WHEN o.ok THEN 'delivered' WHEN o.next IS NULL THEN 'failed' ELSE 'pending' END,
         attempts = d.attempts + 1,
         next_attempt_at = CASE WHEN o.ok THEN NULL ELSE o.next END,
         last_attempt_at = o.at,
         last_status = o.status,
         last_error = CASE WHEN o.ok THEN NULL ELSE o.error END,
         completed_at = CASE WHEN o.ok OR o.next IS NULL THEN o.at ELSE NULL END,
         lease_owner = NULL
    FROM locked JOIN outcome o ON o.seq = locked.seq
   WHERE d.seq = locked.seq AND d.status = 'pending' AND d.lease_owner = @node
  RETURNING d.seq`;

/**
 * Records outcomes, in one statement, only for deliveries still pending and leased by `node`:
 * a node whose lease ran out while it worked finds the delivery claimed by another node (or its
 * outcome recorded) and changes nothing. Returns the seqs recorded; the others were refused (a
 * seq given twice counts once).
 */
export async function recordDeliveryOutcomesPostgres(
  q: Queries,
  node: string,
  outcomes: readonly DeliveryOutcome[],
): Promise<Set<number>> {
  postgresOnly(q, 'recordDeliveryOutcomesPostgres');
  const first = new Map<number, DeliveryOutcome>();
  for (const o of outcomes) if (!first.has(o.seq)) first.set(o.seq, o);
  if (first.size === 0) return new Set();
  const rows = [...first.values()].map((o) => ({
    seq: o.seq,
    at: o.at,
    ok: o.ok,
    status: o.status,
    error: o.error,
    next: o.ok ? null : o.nextAttemptAt,
  }));
  const recorded = await q.all<{ seq: number }>(RECORD_OUTCOMES, {
    outcomes: JSON.stringify(rows),
    node,
  });
  return new Set(recorded.map((r) => r.seq));
}

/*
 * Endpoint health. Each is one UPDATE of the endpoint's row: two nodes recording outcomes for
 * one endpoint at once queue on the row lock, and the second's SET is evaluated on the row the
 * first committed (READ COMMITTED), so neither change is lost. Outcomes from several nodes also
 * arrive out of time order, so the failure run is kept by time, not by arrival: failing_since is
 * the first failure after the latest success (the run SQLite keeps when outcomes arrive in order,
 * where these statements give SQLite's exact values), and the endpoint is disabled once
 * last_failure_at - failing_since reaches the limit, whichever outcome completes the run.
 */

/**
 * markEndpointSuccess's twin. A success clears the run unless the run began after it (then it
 * stands). A success arriving after failures on both sides of it restarts the run at the latest
 * failure: the run's true start lies between the two and is not kept, and the later guess only
 * ever disables later than the truth, never sooner.
 */
export async function markEndpointSuccessPostgres(
  q: Queries,
  endpointId: string,
  at: number,
): Promise<void> {
  postgresOnly(q, 'markEndpointSuccessPostgres');
  await q.run(
    `UPDATE webhook_endpoints
        SET failing_since = CASE WHEN failing_since IS NULL OR failing_since > @at THEN failing_since
                                 WHEN last_failure_at > @at THEN last_failure_at
                                 ELSE NULL END,
            last_success_at = GREATEST(COALESCE(last_success_at, 0), @at)
      WHERE id = @id`,
    { id: endpointId, at },
  );
}

/**
 * markEndpointFailure's twin: a failure at or after the latest success starts or extends the run
 * (one older than that success is past history and only moves last_failure_at). When the run has
 * lasted `disableAfterMs` the endpoint is disabled; returns the reason then, to exactly one
 * caller in the cluster, else null.
 */
export async function markEndpointFailurePostgres(
  q: Queries,
  endpointId: string,
  at: number,
  disableAfterMs: number,
  reason: (failingSince: number) => string,
): Promise<string | null> {
  postgresOnly(q, 'markEndpointFailurePostgres');
  const row = await q.get<{
    failing_since: number | null;
    last_failure_at: number;
    disabled_at: number | null;
  }>(
    `UPDATE webhook_endpoints
        SET failing_since = CASE WHEN last_success_at > @at THEN failing_since ELSE LEAST(failing_since, @at) END,
            last_failure_at = GREATEST(COALESCE(last_failure_at, 0), @at)
      WHERE id = @id
    RETURNING failing_since, last_failure_at, disabled_at`,
    { id: endpointId, at },
  );
  if (
    !row ||
    row.disabled_at !== null ||
    row.failing_since === null ||
    row.last_failure_at - row.failing_since < disableAfterMs
  )
    return null;
  const text = reason(row.failing_since);
  // The run is judged again as the row stands now: outside a transaction another node may have
  // recorded a success (the run is over) or disabled it (its reason stands) since the update.
  const disabled = await q.run(
    `UPDATE webhook_endpoints SET disabled_at = @at::bigint, disabled_reason = @reason
      WHERE id = @id AND disabled_at IS NULL AND failing_since IS NOT NULL AND last_failure_at - failing_since >= @limit::bigint`,
    { id: endpointId, at, reason: text, limit: disableAfterMs },
  );
  return disabled > 0 ? text : null;
}

/** An outcome as the endpoint's health counts it. */
export interface EndpointOutcome {
  endpointId: string;
  at: number;
  ok: boolean;
  error: string | null;
}

/**
 * A batch's outcomes applied to their endpoints' health, as commit/webhookBookkeeping.ts applies
 * them on SQLite: per endpoint, in the order given, a run of successes written once (its latest).
 * Endpoints are visited in ascending id order, so two nodes' batches lock shared endpoints in the
 * same order and never deadlock. Returns the endpoints this disabled, and why.
 */
export async function recordEndpointHealthPostgres(
  q: Queries,
  outcomes: readonly EndpointOutcome[],
  disableAfterMs: number,
  reason: (failingSince: number, outcome: EndpointOutcome) => string,
): Promise<{ endpoint: string; reason: string }[]> {
  postgresOnly(q, 'recordEndpointHealthPostgres');
  const byEndpoint = new Map<string, EndpointOutcome[]>();
  for (const o of outcomes) {
    const list = byEndpoint.get(o.endpointId) ?? [];
    list.push(o);
    byEndpoint.set(o.endpointId, list);
  }
  const disabled: { endpoint: string; reason: string }[] = [];
  for (const endpointId of [...byEndpoint.keys()].sort(compareIds)) {
    let success: number | null = null;
    for (const o of byEndpoint.get(endpointId)!) {
      if (o.ok) {
        success = Math.max(success ?? 0, o.at);
        continue;
      }
      if (success !== null) await markEndpointSuccessPostgres(q, endpointId, success);
      success = null;
      const text = await markEndpointFailurePostgres(q, endpointId, o.at, disableAfterMs, (since) =>
        reason(since, o),
      );
      if (text !== null) disabled.push({ endpoint: endpointId, reason: text });
    }
    if (success !== null) await markEndpointSuccessPostgres(q, endpointId, success);
  }
  return disabled;
}

/** By bytes, as the acceptance commit orders project locks: any one total order, the same on every node. */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One attempt's outcome as a dispatcher cycle records it (commit/webhookBookkeeping.ts's WebhookOutcomeRecord, less the delivery log). */
export interface WebhookOutcome extends DeliveryOutcome {
  endpointId: string;
  /** Whether a failure counts in the endpoint's failure run (not one no retry could help: the event is gone). */
  countsAgainstEndpoint: boolean;
}

export interface WebhookOutcomesResult {
  /** Deliveries whose outcome was recorded. */
  recorded: number[];
  /** Deliveries this node no longer held (claimed by another node since, or already recorded): nothing was written for them. */
  refused: number[];
  disabled: { endpoint: string; reason: string }[];
}

/**
 * A cycle's outcomes in one transaction (a savepoint in the caller's): the deliveries this node
 * still holds, then their endpoints' health. A refused outcome counts for nothing, health
 * included: the node that holds the delivery now records its own attempt.
 */
export async function recordWebhookOutcomesPostgres(
  q: Queries,
  request: {
    node: string;
    outcomes: readonly WebhookOutcome[];
    disableAfterMs: number;
    reason: (failingSince: number, outcome: EndpointOutcome) => string;
  },
): Promise<WebhookOutcomesResult> {
  postgresOnly(q, 'recordWebhookOutcomesPostgres');
  if (request.outcomes.length === 0) return { recorded: [], refused: [], disabled: [] };
  return q.transaction(async (tx) => {
    const recorded = await recordDeliveryOutcomesPostgres(tx, request.node, request.outcomes);
    const counted = new Set<number>();
    const health: EndpointOutcome[] = [];
    for (const o of request.outcomes) {
      // The outcome recorded is a seq's first (recordDeliveryOutcomesPostgres); a repeat counts for nothing.
      if (!recorded.has(o.seq) || counted.has(o.seq)) continue;
      counted.add(o.seq);
      if (o.ok || o.countsAgainstEndpoint)
        health.push({ endpointId: o.endpointId, at: o.at, ok: o.ok, error: o.error });
    }
    const disabled = await recordEndpointHealthPostgres(
      tx,
      health,
      request.disableAfterMs,
      request.reason,
    );
    const refused = [...new Set(request.outcomes.map((o) => o.seq))].filter(
      (seq) => !recorded.has(seq),
    );
    return { recorded: [...recorded].sort((a, b) => a - b), refused, disabled };
  });
}
