import type { ClaimedDelivery, OutboxEventHead, WebhookEndpointRow } from './webhooks.js';
import type { WebhookAttemptRow } from './webhookAttempts.js';

/**
 * One webhook dispatcher cycle's writes, as plain data, and what both backends' cycles share
 * (store/sqlite/webhookCycle.ts, store/postgres/webhookCycle.ts): the fan-out plan, the
 * delivery log's row, the reason an endpoint is disabled.
 */

/** One attempt's outcome, with everything the ladder decided already worked out by the dispatcher. */
export interface WebhookOutcomeRecord {
  seq: number;
  endpointId: string;
  at: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  /** The start of the receiver's answer, for the delivery log. */
  answer?: string | null;
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

/** An outcome as the endpoint's delivery log keeps it. */
export function attemptRow(o: WebhookOutcomeRecord): Omit<WebhookAttemptRow, 'seq'> {
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
    answer: o.answer ?? null,
  };
}

export function disableReason(disableAfterMs: number, since: number, error: string | null): string {
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

function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}
