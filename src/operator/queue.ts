import { LIVE_STATUSES, MESSAGE_STATUSES, type MessageStatus } from '../contract/messageStates.js';
import {
  AGE_BUCKET_MINUTES,
  liveMessageAges,
  messageCountsByStatus,
  messagesByProvider,
  oldestQueuedMessage,
} from '../store/activity.js';
import { iso, type OperatorContext } from './context.js';

/** The age buckets' names, as `queue summary` prints them. */
export const AGE_BUCKETS = [
  ...AGE_BUCKET_MINUTES.map((m, i) => `${i === 0 ? 0 : AGE_BUCKET_MINUTES[i - 1]}-${m}m`),
  `${AGE_BUCKET_MINUTES.at(-1)}m+`,
];

export interface QueueSummary {
  generated_at: string;
  /** Every message in the index, by status. */
  by_status: Record<MessageStatus, number>;
  /** Live messages by status, then by age since acceptance (AGE_BUCKETS), like qshape. */
  by_age: Record<(typeof LIVE_STATUSES)[number], Record<string, number>>;
  /** Messages a provider took (or last refused), by its slug, then by status. */
  by_provider: Record<string, Partial<Record<MessageStatus, number>>>;
  oldest_waiting: {
    id: string;
    project_id: string;
    age_seconds: number;
    attempts: number;
    next_attempt_at: string | null;
  } | null;
}

/** `postern queue summary`: the queue's shape, read from the index. */
export async function queueSummary(ctx: OperatorContext): Promise<QueueSummary> {
  const now = ctx.clock.now();
  const byStatus = Object.fromEntries(MESSAGE_STATUSES.map((s) => [s, 0])) as Record<
    MessageStatus,
    number
  >;
  for (const row of await messageCountsByStatus(ctx.store))
    byStatus[row.status as MessageStatus] = row.count;
  const byAge = Object.fromEntries(
    LIVE_STATUSES.map((s) => [s, Object.fromEntries(AGE_BUCKETS.map((b) => [b, 0]))]),
  ) as QueueSummary['by_age'];
  for (const row of await liveMessageAges(ctx.store, now))
    byAge[row.status as (typeof LIVE_STATUSES)[number]][AGE_BUCKETS[row.bucket]] = row.count;
  const byProvider: QueueSummary['by_provider'] = {};
  for (const row of await messagesByProvider(ctx.store)) {
    byProvider[row.provider] ??= {};
    byProvider[row.provider][row.status] = row.count;
  }
  const oldest = await oldestQueuedMessage(ctx.store, null);
  return {
    generated_at: iso(now)!,
    by_status: byStatus,
    by_age: byAge,
    by_provider: byProvider,
    oldest_waiting: oldest
      ? {
          id: oldest.id,
          project_id: oldest.project_id,
          age_seconds: Math.max(0, Math.round((now - oldest.created_at) / 1000)),
          attempts: oldest.attempts,
          next_attempt_at: iso(oldest.next_attempt_at),
        }
      : null,
  };
}

/** The summary as a table (qshape's layout): a row per live status, a column per age bucket. */
export function queueSummaryTable(summary: QueueSummary): string[] {
  const head = ['status', 'total', ...AGE_BUCKETS];
  const rows = LIVE_STATUSES.map((s) => [
    s,
    String(summary.by_status[s]),
    ...AGE_BUCKETS.map((b) => String(summary.by_age[s][b])),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    `${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')}\n`;
  const finished = MESSAGE_STATUSES.filter(
    (s) => !(LIVE_STATUSES as readonly string[]).includes(s),
  );
  const out = [
    line(head),
    ...rows.map(line),
    '\n',
    `finished: ${finished.map((s) => `${s} ${summary.by_status[s]}`).join(', ')}\n`,
  ];
  const providers = Object.entries(summary.by_provider);
  if (providers.length > 0)
    out.push(
      `by provider: ${providers
        .map(
          ([slug, counts]) =>
            `${slug} (${Object.entries(counts)
              .map(([s, n]) => `${s} ${n}`)
              .join(', ')})`,
        )
        .join('; ')}\n`,
    );
  const o = summary.oldest_waiting;
  out.push(
    o
      ? `oldest waiting: ${o.id} (${o.project_id}), ${o.age_seconds} s, ${o.attempts} attempts, next ${o.next_attempt_at ?? 'now'}\n`
      : 'oldest waiting: none\n',
  );
  return out;
}
