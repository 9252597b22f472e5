import type { Clock } from '../clock.js';
import {
  type ActivityAttempt,
  type ActivityEvent,
  attemptsAfterSeq,
  attemptsAtSeqs,
  eventsAfterSeq,
  eventsAtSeqs,
  lastSeqBefore,
  messageHeads,
} from '../store/activity.js';
import type { Queries } from '../store/queries.js';
import { SeqFollower } from './seqFollower.js';

const HOUR = 3_600_000;
const MINUTE = 60_000;
/** Rows read per step; the event loop gets a turn between steps. */
const STEP = 5_000;

export const HOURLY_TYPES = [
  'mail.accepted',
  'mail.sent',
  'mail.delivered',
  'mail.bounced',
  'mail.complained',
  'mail.failed',
  'mail.suppressed',
] as const;

/** Hand-offs that failed for now: no lifecycle event says so, so an hour of failing providers would otherwise show nothing. */
const DEFERRED = 'deferred';

interface ProviderMinute {
  sent: number;
  failed: number;
}

/**
 * What happened lately (the overview's hourly counts, provider health, the live feed), read by following the events
 * outbox and attempts by their seqs (SeqFollower): no index on time, no hooks in either door.
 */
function mapEntry<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = create();
    map.set(key, value);
  }
  return value;
}

export class ActivityTail {
  private events: SeqFollower<ActivityEvent> | null = null;
  private attempts: SeqFollower<ActivityAttempt> | null = null;
  /** hour start → project → type → count */
  private readonly hourly = new Map<number, Map<string, Map<string, number>>>();
  /** minute start → account → counts */
  private readonly providerMinutes = new Map<number, Map<string, ProviderMinute>>();
  private readonly lastErrors = new Map<string, { at: number; reply: string | null }>();
  private readonly listeners = new Set<(events: ActivityEvent[]) => void>();
  private running: Promise<void> | null = null;

  constructor(
    private readonly store: Queries,
    private readonly clock: Clock,
  ) {}

  subscribe(listener: (events: ActivityEvent[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  messagesNow(ids: readonly string[]): ReturnType<typeof messageHeads> {
    return messageHeads(this.store, ids);
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  /** One catch-up at a time; a caller arriving meanwhile waits for it. */
  catchUp(): Promise<void> {
    this.running ??= this.read().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async read(): Promise<void> {
    const now = this.clock.now();
    const store = this.store;
    this.events ??= new SeqFollower<ActivityEvent>(
      {
        after: (seq, limit) => eventsAfterSeq(store, seq, limit),
        at: (seqs) => eventsAtSeqs(store, seqs),
        timeOf: (e) => e.created_at,
      },
      await lastSeqBefore(store, 'events', now - 24 * HOUR),
    );
    this.attempts ??= new SeqFollower<ActivityAttempt>(
      {
        after: (seq, limit) => attemptsAfterSeq(store, seq, limit),
        at: (seqs) => attemptsAtSeqs(store, seqs),
        timeOf: (a) => a.finished_at,
      },
      await lastSeqBefore(store, 'attempts', now - 24 * HOUR),
    );
    for (;;) {
      const events = await this.events.next(STEP, now);
      for (const e of events.rows) this.countEvent(e);
      if (events.rows.length > 0) for (const listener of this.listeners) listener(events.rows);
      const attempts = await this.attempts.next(STEP, now);
      for (const a of attempts.rows) this.countAttempt(a);
      if (!events.full && !attempts.full) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.forgetBefore(now);
  }

  private countEvent(e: ActivityEvent): void {
    this.countHourly(e.created_at, e.project_id, e.type);
  }

  private countHourly(at: number, project: string, type: string): void {
    const hour = Math.floor(at / HOUR) * HOUR;
    const projects = mapEntry(this.hourly, hour, () => new Map<string, Map<string, number>>());
    const types = mapEntry(projects, project, () => new Map<string, number>());
    types.set(type, (types.get(type) ?? 0) + 1);
  }

  private countAttempt(a: ActivityAttempt): void {
    if ((a.outcome === 'temporary' || a.outcome === 'account') && a.project_id !== null)
      this.countHourly(a.finished_at, a.project_id, DEFERRED);
    const account = a.provider_account_id ?? a.provider_slug ?? 'unknown';
    const minute = Math.floor(a.finished_at / MINUTE) * MINUTE;
    const accounts = mapEntry(
      this.providerMinutes,
      minute,
      () => new Map<string, ProviderMinute>(),
    );
    const counts = accounts.get(account) ?? { sent: 0, failed: 0 };
    if (a.outcome === 'sent') counts.sent++;
    else {
      counts.failed++;
      // An attempt that committed late (SeqFollower) is not taken for a later one.
      if ((this.lastErrors.get(account)?.at ?? -Infinity) <= a.finished_at)
        this.lastErrors.set(account, { at: a.finished_at, reply: a.reply });
    }
    accounts.set(account, counts);
  }

  private forgetBefore(now: number): void {
    for (const hour of this.hourly.keys()) if (hour < now - 25 * HOUR) this.hourly.delete(hour);
    for (const minute of this.providerMinutes.keys())
      if (minute < now - 61 * MINUTE) this.providerMinutes.delete(minute);
  }

  /** Oldest first, the current hour last; `projects` null: all. */
  hourlyCounts(
    projects: readonly string[] | null,
  ): { hour: string; counts: Record<string, number> }[] {
    const current = Math.floor(this.clock.now() / HOUR) * HOUR;
    const out: { hour: string; counts: Record<string, number> }[] = [];
    for (let h = current - 23 * HOUR; h <= current; h += HOUR) {
      const counts: Record<string, number> = Object.fromEntries(
        [...HOURLY_TYPES.map((t) => t.slice('mail.'.length)), DEFERRED].map((k) => [k, 0]),
      );
      for (const [project, types] of this.hourly.get(h) ?? []) {
        if (projects !== null && !projects.includes(project)) continue;
        for (const [type, n] of types) {
          const key = type.startsWith('mail.') ? type.slice('mail.'.length) : type;
          if (key in counts) counts[key] += n;
        }
      }
      out.push({ hour: new Date(h).toISOString(), counts });
    }
    return out;
  }

  providerHour(accountId: string): {
    handoffs: number;
    failures: number;
    last_error: string | null;
    last_error_at: number | null;
  } {
    const since = this.clock.now() - HOUR;
    let handoffs = 0;
    let failures = 0;
    for (const [minute, accounts] of this.providerMinutes) {
      if (minute + MINUTE <= since) continue;
      const c = accounts.get(accountId);
      if (!c) continue;
      handoffs += c.sent + c.failed;
      failures += c.failed;
    }
    const last = this.lastErrors.get(accountId);
    return { handoffs, failures, last_error: last?.reply ?? null, last_error_at: last?.at ?? null };
  }
}
