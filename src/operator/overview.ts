import { statfs } from 'node:fs/promises';
import { LIVE_STATUSES } from '../contract/messageStates.js';
import {
  attachedProviderAccounts,
  liveMessageCounts,
  oldestQueuedMessage,
  troubledWebhookEndpoints,
} from '../store/activity.js';
import { backendOf } from '../store/backendOf.js';
import type { Queries } from '../store/queries.js';
import type { ActivityTail } from './activity.js';
import { iso, type OperatorContext } from './context.js';

const STORAGE_TTL_MS = 5 * 60_000;

/** The stored MIME the index accounts for, kept for `ttlMs`, and the state directory's free space. */
export class StorageFigures {
  private cached: { at: number; bytes: number; files: number } | null = null;
  private counting: Promise<{ bytes: number; files: number }> | null = null;

  constructor(
    private readonly store: Queries,
    private readonly stateDir: string,
    private readonly ttlMs = STORAGE_TTL_MS,
  ) {}

  async spool(now: number): Promise<{ at: number; bytes: number; files: number }> {
    if (!this.cached || now - this.cached.at > this.ttlMs) {
      this.counting ??= this.count().finally(() => (this.counting = null));
      this.cached = { at: now, ...(await this.counting) };
    }
    return this.cached;
  }

  async figures(now: number): Promise<{
    spool_bytes: number;
    spool_counted_at: string;
    disk_free_bytes: number | null;
    disk_total_bytes: number | null;
  }> {
    const spool = await this.spool(now);
    let free: number | null = null;
    let total: number | null = null;
    try {
      const fs = await statfs(this.stateDir);
      free = fs.bavail * fs.bsize;
      total = fs.blocks * fs.bsize;
    } catch {
      // Not every platform reports it.
    }
    return {
      spool_bytes: spool.bytes,
      spool_counted_at: new Date(spool.at).toISOString(),
      disk_free_bytes: free,
      disk_total_bytes: total,
    };
  }

  private count(): Promise<{ bytes: number; files: number }> {
    return backendOf(this.store).bodies.storedFigures(this.store);
  }
}

export interface OverviewSources {
  activity: ActivityTail;
  storage: StorageFigures;
  /** The server knows; the CLI does not. */
  throttledUntil?: (accountId: string) => number | null;
}

/** Provider health and storage are for owners only (`includeSystem`). */
export async function overview(
  ctx: OperatorContext,
  sources: OverviewSources,
  projects: readonly string[] | null,
  includeSystem: boolean,
) {
  const now = ctx.clock.now();
  await sources.activity.catchUp();
  const inScope = (projectId: string) => projects === null || projects.includes(projectId);
  const queue: Record<string, number> = Object.fromEntries(LIVE_STATUSES.map((s) => [s, 0]));
  for (const row of await liveMessageCounts(ctx.store))
    if (inScope(row.project_id)) queue[row.status] += row.count;
  const oldest = await oldestQueuedMessage(ctx.store, projects);
  const webhooks = (await troubledWebhookEndpoints(ctx.store))
    .filter((w) => inScope(w.project_id))
    .map((w) => ({
      id: w.id,
      project_id: w.project_id,
      url: w.url,
      state: w.disabled_at === null ? ('failing' as const) : ('disabled' as const),
      failing_since: iso(w.failing_since),
      last_failure_at: iso(w.last_failure_at),
      disabled_at: iso(w.disabled_at),
      disabled_reason: w.disabled_reason,
    }));
  const providers = includeSystem
    ? (await attachedProviderAccounts(ctx.store)).map((a) => {
        const hour = sources.activity.providerHour(a.id);
        const throttled = sources.throttledUntil?.(a.id) ?? null;
        return {
          id: a.id,
          project_id: a.project_id,
          slug: a.slug,
          handoffs_last_hour: hour.handoffs,
          failures_last_hour: hour.failures,
          throttled_until: throttled !== null && throttled > now ? iso(throttled) : null,
          last_error: hour.last_error,
          last_error_at: iso(hour.last_error_at),
        };
      })
    : null;
  return {
    generated_at: iso(now)!,
    hourly: sources.activity.hourlyCounts(projects),
    queue,
    oldest_waiting: oldest
      ? {
          id: oldest.id,
          project_id: oldest.project_id,
          created_at: iso(oldest.created_at)!,
          age_seconds: Math.max(0, Math.round((now - oldest.created_at) / 1000)),
          attempts: oldest.attempts,
          next_attempt_at: iso(oldest.next_attempt_at),
        }
      : null,
    providers,
    webhooks,
    storage: includeSystem ? await sources.storage.figures(now) : null,
  };
}
