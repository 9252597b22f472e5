import type { OutboxEventHead } from './eventOutbox.js';
import type { WebhookAttemptRow } from './webhookAttempts.js';
import type { ClaimedDelivery } from './webhookDeliveries.js';
import type { WebhookEndpointRow } from './webhookEndpoints.js';

/** One webhook dispatcher cycle's writes, as plain data, and what both backends' cycles share. */

/** The ladder's decision already worked out by the dispatcher. */
export interface WebhookOutcomeRecord {
  seq: number;
  endpointId: string;
  at: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  answer?: string | null;
  /** null: failed for good. */
  nextAttemptAt: number | null;
  /** Not for a failure no retry could help (the event is gone). */
  countsAgainstEndpoint: boolean;
  deliveryId: string;
  type: string;
  attempt: number;
  durationMs: number;
}

/** Run in one transaction by the index's one writer, so the idle-priority dispatcher never holds the write lock. */
export interface WebhookBookkeeping {
  now: number;
  outcomes: WebhookOutcomeRecord[];
  disableAfterMs: number;
  /** A delivery row per endpoint that wants each (decided inside the transaction). */
  fanOut: OutboxEventHead[];
  /** Past `fanOut`, or moved over events no endpoint wanted. Null: unchanged. */
  cursor: number | null;
  /** PostgreSQL (no cursor): at most this many queued events taken off webhook_fanout_pending (0: none). */
  fanOutQueued: number;
  /** PostgreSQL: only this node's own leases' outcomes are recorded. */
  node: string;
  /** Per endpoint, how many more it can hold (`defaultRoom` if not listed); below `minRoom` it claims nothing. */
  claims: {
    room: Record<string, number>;
    defaultRoom: number;
    minRoom: number;
    leaseUntil: number;
  };
  prune: { before: number; limit: number } | null;
}

export interface WebhookBookkeepingResult {
  disabled: { endpoint: string; reason: string }[];
  /** PostgreSQL: the deliveries whose outcome was recorded (the others were another node's by then); null on SQLite. */
  recorded: number[] | null;
  claimed: { endpoint: WebhookEndpointRow; rows: ClaimedDelivery[] }[];
  fannedOut: number;
  pruned: number;
}

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

/** One per (event, endpoint of its project that wants its type and is newer than it). */
export function fanOutPlan(
  endpoints: WebhookEndpointRow[],
  events: OutboxEventHead[],
): { endpointId: string; event: OutboxEventHead }[] {
  if (endpoints.length === 0) return [];
  const byProject = new Map<
    string,
    { endpoint: WebhookEndpointRow; types: Set<string> | null }[]
  >();
  for (const e of endpoints) {
    const list = byProject.get(e.project_id) ?? [];
    list.push({
      endpoint: e,
      types: e.event_types === null ? null : new Set(JSON.parse(e.event_types) as string[]),
    });
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
