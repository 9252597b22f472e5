import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { openDatabase, type Db } from '../store/db.js';
import {
  claimDueDeliveries, eventsAfter, hasDueDelivery, insertWebhookDelivery, latestEventSeq, markEndpointFailure, markEndpointSuccess, newPendingDelivery, outboxEvent,
  pruneWebhookDeliveries, recordAttemptFailed, recordDelivered, registeredWebhookEndpoints, setWebhookCursor, webhookCursor, type ClaimedDelivery, type OutboxEventHead,
  type WebhookEndpointRow,
} from '../store/webhooks.js';
import { envelopeBody } from './envelope.js';
import { newDeliveryId } from '../ids.js';
import { retryDelayMs } from './ladder.js';
import { WebhookSender, type AttemptResult } from './sender.js';
import type { Resolver } from './targets.js';

/**
 * Gap between two dispatcher transactions while there is work. Outcomes, fan-out and claims of
 * that time share one short transaction. The gap adapts to the index: while the dispatcher
 * keeps finding the write lock taken (acceptance's group commits are busy), it doubles, up to
 * MAX_WRITE_GAP_MS, so fewer and larger transactions get in acceptance's way; a transaction that
 * gets the lock at once shortens it again, down to MIN_WRITE_GAP_MS.
 */
const MIN_WRITE_GAP_MS = 25;
const MAX_WRITE_GAP_MS = 200;
/** Retry delay when another connection holds the write lock (never waited for inside SQLite). */
const LOCKED_RETRY_MS = 3;
/**
 * Claimed per endpoint (in flight and queued here) per round of its concurrency, per 5 ms of
 * write gap, at least 5 rounds: enough to keep it busy from one transaction to the next.
 */
const PREFETCH_ROUNDS_MIN = 5;
const PRUNE_EVERY_MS = 3600_000;
/** How often a cursor moved only in memory (no endpoint wanted those events) is written. */
const CURSOR_PERSIST_MS = 5000;
const PRUNE_CHUNK = 5000;

export interface DispatcherDeps {
  /** The state directory: the dispatcher opens its own connection to the index. */
  stateDir: string;
  clock: Clock;
  logger: Logger;
  config: PosternConfig;
  /** DNS resolution (tests); the system resolver by default. */
  resolver?: Resolver;
  /** Extra trusted CAs (tests with a self-signed receiver). */
  ca?: string | Buffer;
  random?: () => number;
}

interface Outcome {
  delivery: ClaimedDelivery;
  endpointId: string;
  at: number;
  result: AttemptResult;
  /** No retry can help (the event is gone or unreadable). */
  permanent: boolean;
}

/** One endpoint's share: its latest row, its claimed deliveries waiting for a slot, its attempts in flight. */
interface Lane {
  endpoint: WebhookEndpointRow;
  queue: ClaimedDelivery[];
  inFlight: number;
}

const isLocked = (err: unknown) => {
  const code = (err as { code?: string }).code ?? '';
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
};

/**
 * The webhook dispatcher. It reads only the `events` outbox:
 *
 * 1. Fan-out: events after the cursor (in batches) become one `webhook_deliveries` row per
 *    matching endpoint; the rows and the cursor move in one transaction, so a crash either
 *    keeps both or neither: no event is skipped, none is fanned out twice. Events no endpoint
 *    wants only move the cursor in memory (written every few seconds): a server without
 *    endpoints costs the index nothing.
 * 2. Claims: per enabled endpoint, due deliveries up to a few times its concurrency, by pushing
 *    their due time out by the lease (a crash makes them due again after it: at-least-once).
 *    Only claimed rows are ever in memory, so a queue of millions costs nothing here.
 * 3. Attempts: signed POSTs from each endpoint's lane, at most `per_endpoint_concurrency` per
 *    endpoint and `concurrency` overall, lanes served in turn: a slow endpoint only ever
 *    occupies its own share.
 * 4. Outcomes: delivered, or the ladder's next time, or failed after the last attempt; the
 *    endpoint's failure run (and, after `disable_after_seconds`, its disabling) is kept with them.
 *
 * Steps 4, 1 and 2 run as ONE transaction per cycle (25 to 200 ms apart, see MIN_WRITE_GAP_MS) on the
 * dispatcher's own connection. That connection never waits for the write lock (busy_timeout 0:
 * a locked index just moves the cycle a few milliseconds later) and commits with
 * synchronous=NORMAL (no fsync per cycle). That is safe here: what a power loss could
 * take back is the tail of the WAL — outcomes (the delivery is then repeated: at-least-once),
 * claims (harmless) or a fan-out together with its cursor (done again) — never an event, which
 * the other connections commit with FULL.
 */
export class WebhookDispatcher {
  private db: Db | null = null;
  private readonly sender: WebhookSender;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private lastWrite = 0;
  private writeGap = MIN_WRITE_GAP_MS;
  /** Times this cycle's transaction found the write lock taken. */
  private lockedTries = 0;
  private stopping = false;
  private started = false;
  private inFlight = 0;
  private readonly lanes = new Map<string, Lane>();
  /** Claimed by this process and not yet recorded (queued, in flight, or outcome unwritten): never claimed twice, even past a lease. */
  private readonly held = new Set<number>();
  private outcomes: Outcome[] = [];
  private readonly idle: (() => void)[] = [];
  private cursor = 0;
  /** The cursor moved in memory only (over events no endpoint wanted). */
  private cursorDirty = false;
  private lastPrune = 0;
  private rotation = 0;
  private cycles = 0;
  private readonly leaseMs: number;
  private readonly random: () => number;

  constructor(private readonly deps: DispatcherDeps) {
    const c = deps.config.webhooks;
    this.leaseMs = Math.max(c.lease_ms, c.timeout_ms + 2000);
    this.random = deps.random ?? Math.random;
    this.sender = new WebhookSender({
      timeoutMs: c.timeout_ms,
      policy: { allowPrivate: c.allow_private_targets },
      maxSocketsPerEndpoint: c.per_endpoint_concurrency,
      resolver: deps.resolver,
      ca: deps.ca,
      now: () => deps.clock.now(),
    });
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    const db = openDatabase(this.deps.stateDir, this.deps.logger, { migrate: false, durability: 'at-least-once' });
    db.pragma('busy_timeout = 0');
    this.db = db;
    this.cursor = webhookCursor(db);
    this.lastPrune = this.deps.clock.now() - PRUNE_EVERY_MS + 60_000;
    this.deps.logger.info({ cursor: this.cursor, allow_private_targets: this.deps.config.webhooks.allow_private_targets }, 'webhook dispatcher started');
    this.wake(0);
  }

  /** Look for work now (new events, an endpoint re-enabled). */
  kick(): void {
    this.wake(0);
  }

  async stop(): Promise<void> {
    if (!this.started || this.stopping) return;
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    // Queued deliveries stay claimed (due again after the lease); attempts in flight have their own deadline.
    for (const lane of this.lanes.values()) lane.queue.length = 0;
    if (this.inFlight > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    const db = this.db!;
    if (this.outcomes.length > 0 || this.cursorDirty) {
      db.pragma('busy_timeout = 10000');
      try {
        db.transaction(() => {
          this.applyOutcomes(this.outcomes.splice(0));
          if (this.cursorDirty) setWebhookCursor(db, this.cursor);
        })();
      } catch (err) {
        this.deps.logger.error({ err }, 'webhook outcomes not recorded at shutdown; those deliveries will be repeated');
      }
    }
    this.sender.close();
    db.close();
    this.db = null;
  }

  private wake(delayMs: number): void {
    if (this.stopping || !this.started) return;
    const at = Date.now() + delayMs;
    if (this.timer && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.cycle();
    }, delayMs);
    this.timer.unref();
  }

  /** Wakes for a write no sooner than the current gap after the last one. */
  private wakeForWrite(): void {
    this.wake(Math.max(0, this.lastWrite + this.writeGap - Date.now()));
  }

  private claimedOn(lane: Lane | undefined): number {
    return lane ? lane.queue.length + lane.inFlight : 0;
  }

  private cycle(): void {
    if (this.stopping) return;
    const { clock, config, logger } = this.deps;
    const c = config.webhooks;
    const db = this.db!;
    const now = clock.now();
    const prefetch = c.per_endpoint_concurrency * Math.max(PREFETCH_ROUNDS_MIN, Math.ceil(this.writeGap / 5));
    // A lane is refilled once it has room for at least one full round of its concurrency.
    const wantsClaim = (e: WebhookEndpointRow) => e.disabled_at === null && prefetch - this.claimedOn(this.lanes.get(e.id)) >= c.per_endpoint_concurrency;
    let more = false;
    try {
      // Read first (readers never wait in WAL): is there anything to write?
      // The next events, and whether any of them is for an endpoint: events no endpoint wants
      // only move the cursor, in memory (persisted with the next write, or every few seconds).
      // Events are read BEFORE the endpoints: an endpoint missing from the list was registered
      // after these events were visible, so its from_seq excludes them all.
      const latest = latestEventSeq(db);
      const events = latest > this.cursor ? eventsAfter(db, this.cursor, c.batch_size) : [];
      const pruneDue = now - this.lastPrune >= PRUNE_EVERY_MS;
      const registered = registeredWebhookEndpoints(db);
      this.refreshLanes(registered);
      const wanted = events.length > 0 && this.fanOutPlan(registered, events).length > 0;
      if (events.length > 0 && !wanted) {
        this.cursor = events[events.length - 1].seq;
        this.cursorDirty = true;
      }
      const persistCursor = this.cursorDirty && Date.now() - this.lastWrite >= CURSOR_PERSIST_MS;
      const claimable = registered.some((e) => wantsClaim(e) && hasDueDelivery(db, e.id, now));
      if (!wanted && !claimable && this.outcomes.length === 0 && !pruneDue && !persistCursor) {
        this.wake(latest > this.cursor ? 0 : c.poll_interval_ms);
        return;
      }
      const outcomes = this.outcomes.slice();
      let fannedOut = 0;
      let newCursor = this.cursor;
      let pruned = 0;
      let disabled: { endpoint: string; reason: string }[] = [];
      let claimed: { lane: WebhookEndpointRow; rows: ClaimedDelivery[] }[] = [];
      db.transaction(() => {
        disabled = this.applyOutcomes(outcomes);
        // Endpoints read again inside the write transaction: one removed a moment ago gets no
        // new rows (one registered since wants none of these events: its from_seq is newer).
        const endpoints = registeredWebhookEndpoints(db);
        if (wanted) {
          for (const row of this.fanOutPlan(endpoints, events)) insertWebhookDelivery(db, newPendingDelivery(newDeliveryId(), row.endpointId, row.event, now));
          fannedOut = events.length;
          newCursor = events[events.length - 1].seq;
        }
        if (wanted || this.cursorDirty) setWebhookCursor(db, newCursor);
        // A delivery whose outcome was just recorded may be due again at once (a zero wait): claimable.
        const recorded = new Set(outcomes.map((o) => o.delivery.seq));
        claimed = this.claim(endpoints.filter(wantsClaim), now, prefetch, recorded);
        if (pruneDue) pruned = pruneWebhookDeliveries(db, now - c.retention_days * 86_400_000, PRUNE_CHUNK);
      }).immediate();
      // Committed.
      this.lastWrite = Date.now();
      this.writeGap = this.lockedTries > 0 ? Math.min(MAX_WRITE_GAP_MS, this.writeGap * 2) : Math.max(MIN_WRITE_GAP_MS, Math.floor(this.writeGap / 2));
      this.lockedTries = 0;
      this.outcomes.splice(0, outcomes.length);
      for (const o of outcomes) this.held.delete(o.delivery.seq);
      this.cursor = newCursor;
      this.cursorDirty = false;
      for (const { lane, rows } of claimed) this.enqueue(lane, rows);
      if (pruneDue) {
        if (pruned < PRUNE_CHUNK) this.lastPrune = now;
        if (pruned > 0) logger.info({ removed: pruned }, 'finished webhook deliveries pruned');
      }
      for (const d of disabled) {
        logger.warn({ endpoint_id: d.endpoint, reason: d.reason }, 'webhook endpoint disabled');
        // Nothing more from its lane; what was queued waits for `enable`.
        const lane = this.lanes.get(d.endpoint);
        if (lane) {
          lane.endpoint = { ...lane.endpoint, disabled_at: now, disabled_reason: d.reason };
          for (const q of lane.queue) this.held.delete(q.seq);
          lane.queue.length = 0;
        }
      }
      more = fannedOut === c.batch_size || latest > this.cursor || claimed.some(({ rows }) => rows.length > 0);
      this.closeIdleAgents(registered);
    } catch (err) {
      if (isLocked(err)) {
        // Another writer (acceptance, delivery) holds the lock: come back in a moment rather
        // than wait for it (on the event loop, in-process mode, that wait would block).
        this.lockedTries++;
        this.wake(LOCKED_RETRY_MS);
        return;
      }
      logger.error({ err }, 'webhook dispatcher cycle failed');
      this.wake(c.poll_interval_ms);
      return;
    }
    this.pump();
    if (more || this.outcomes.length > 0) this.wakeForWrite();
    else this.wake(c.poll_interval_ms);
  }

  /** Lanes follow the endpoints: a secret rotated since is used at once; a disabled or removed endpoint's queue is dropped (its rows stay claimed until the lease runs out, or `enable` makes them due). */
  private refreshLanes(registered: WebhookEndpointRow[]): void {
    const byId = new Map(registered.map((e) => [e.id, e]));
    for (const [id, lane] of this.lanes) {
      const current = byId.get(id);
      if (current) lane.endpoint = current;
      if (!current || current.disabled_at !== null) {
        for (const d of lane.queue) this.held.delete(d.seq);
        lane.queue.length = 0;
      }
      if (lane.queue.length === 0 && lane.inFlight === 0) this.lanes.delete(id);
    }
  }

  private closeIdleAgents(registered: WebhookEndpointRow[]): void {
    // Sockets of removed endpoints are closed (every few hundred cycles is plenty).
    if (++this.cycles % 500 !== 0) return;
    this.sender.forgetEndpointsExcept(new Set(registered.map((e) => e.id)));
  }

  /** The delivery rows a batch of events makes: one per (event, endpoint of its project that wants its type and is newer than it). */
  private fanOutPlan(endpoints: WebhookEndpointRow[], events: OutboxEventHead[]): { endpointId: string; event: OutboxEventHead }[] {
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

  /** Due deliveries of the given (enabled) endpoints, up to each lane's room. */
  private claim(endpoints: WebhookEndpointRow[], now: number, prefetch: number, recorded: Set<number>): { lane: WebhookEndpointRow; rows: ClaimedDelivery[] }[] {
    const db = this.db!;
    const out: { lane: WebhookEndpointRow; rows: ClaimedDelivery[] }[] = [];
    for (const endpoint of endpoints) {
      const room = prefetch - this.claimedOn(this.lanes.get(endpoint.id));
      if (room <= 0) continue;
      const rows = claimDueDeliveries(db, endpoint.id, now, now + this.leaseMs, room).filter((d) => recorded.has(d.seq) || !this.held.has(d.seq));
      if (rows.length > 0) out.push({ lane: endpoint, rows });
    }
    return out;
  }

  private enqueue(endpoint: WebhookEndpointRow, rows: ClaimedDelivery[]): void {
    let lane = this.lanes.get(endpoint.id);
    if (!lane) {
      lane = { endpoint, queue: [], inFlight: 0 };
      this.lanes.set(endpoint.id, lane);
    }
    for (const d of rows) {
      this.held.add(d.seq);
      lane.queue.push(d);
    }
  }

  /** Starts attempts from the lanes, in turn, within each endpoint's and the overall limit. */
  private pump(): void {
    const c = this.deps.config.webhooks;
    if (this.stopping || this.lanes.size === 0) return;
    const lanes = [...this.lanes.values()];
    const start = this.rotation++ % lanes.length;
    let progressed = true;
    while (progressed && this.inFlight < c.concurrency) {
      progressed = false;
      for (let i = 0; i < lanes.length && this.inFlight < c.concurrency; i++) {
        const lane = lanes[(start + i) % lanes.length];
        if (lane.queue.length === 0 || lane.inFlight >= c.per_endpoint_concurrency) continue;
        const delivery = lane.queue.shift()!;
        lane.inFlight++;
        this.inFlight++;
        progressed = true;
        void this.attempt(lane, delivery);
      }
    }
  }

  private async attempt(lane: Lane, delivery: ClaimedDelivery): Promise<void> {
    const { clock, logger } = this.deps;
    const endpoint = lane.endpoint;
    let result: AttemptResult;
    let permanent = false;
    try {
      const ev = delivery.event_seq === null ? undefined : outboxEvent(this.db!, delivery.event_seq);
      let body: Buffer | null = null;
      let broken: string | null = ev ? null : 'the event is no longer in the outbox';
      if (ev) {
        try {
          body = envelopeBody(delivery.id, ev.type, ev.created_at, ev.data);
        } catch (err) {
          broken = `the event cannot be enveloped: ${(err as Error).message}`;
        }
      }
      if (body === null) {
        permanent = true;
        result = { ok: false, status: null, error: broken, retryAfterMs: null, refused: false };
        logger.error({ delivery_id: delivery.id, event_seq: delivery.event_seq, reason: broken }, 'webhook delivery cannot be built; failed');
      } else {
        const now = clock.now();
        const secrets = [endpoint.secret];
        if (endpoint.previous_secret && endpoint.previous_secret_expires_at !== null && endpoint.previous_secret_expires_at > now) secrets.push(endpoint.previous_secret);
        result = await this.sender.send(endpoint.id, { url: endpoint.url, deliveryId: delivery.id, type: delivery.type, body, secrets, timestamp: Math.floor(now / 1000) });
      }
    } catch (err) {
      if (isLocked(err)) {
        // The outbox could not be read this instant: not an attempt. Due again after the lease.
        this.finish(lane, delivery.seq, null);
        return;
      }
      result = { ok: false, status: null, error: `internal error: ${(err as Error).message}`, retryAfterMs: null, refused: false };
    }
    if (!result.ok) logger.debug({ delivery_id: delivery.id, endpoint_id: endpoint.id, attempt: delivery.attempts + 1, error: result.error }, 'webhook attempt failed');
    this.finish(lane, delivery.seq, { delivery, endpointId: endpoint.id, at: clock.now(), result, permanent });
  }

  private finish(lane: Lane, seq: number, outcome: Outcome | null): void {
    lane.inFlight--;
    this.inFlight--;
    if (outcome) this.outcomes.push(outcome);
    else this.held.delete(seq);
    if (lane.queue.length === 0 && lane.inFlight === 0) this.lanes.delete(lane.endpoint.id);
    if (this.inFlight === 0) this.idle.splice(0).forEach((r) => r());
    this.pump();
    this.wakeForWrite();
  }

  /** Records outcomes (inside the caller's transaction); returns the endpoints this disabled. */
  private applyOutcomes(outcomes: Outcome[]): { endpoint: string; reason: string }[] {
    const db = this.db!;
    const c = this.deps.config.webhooks;
    const disabled: { endpoint: string; reason: string }[] = [];
    // An endpoint's health is written once per run of successes (the latest one), in order with its failures.
    const successes = new Map<string, number>();
    const flushSuccess = (endpointId: string) => {
      const at = successes.get(endpointId);
      if (at === undefined) return;
      markEndpointSuccess(db, endpointId, at);
      successes.delete(endpointId);
    };
    for (const o of outcomes) {
      const record = { seq: o.delivery.seq, at: o.at, status: o.result.status, error: o.result.error };
      if (o.result.ok) {
        recordDelivered(db, record);
        successes.set(o.endpointId, Math.max(successes.get(o.endpointId) ?? 0, o.at));
        continue;
      }
      flushSuccess(o.endpointId);
      const attempts = o.delivery.attempts + 1;
      const wait = o.permanent ? null : retryDelayMs(attempts, c.retry_ladder_seconds, c.retry_jitter, o.result.retryAfterMs, this.random);
      recordAttemptFailed(db, record, wait === null ? null : o.at + wait);
      if (wait === null && !o.permanent) {
        this.deps.logger.warn({ delivery_id: o.delivery.id, endpoint_id: o.endpointId, attempts, error: o.result.error }, 'webhook delivery failed after its last attempt');
      }
      if (o.permanent) continue;
      const disableAfterMs = c.disable_after_seconds * 1000;
      const reason = (since: number) =>
        `every attempt failed for ${formatDuration(disableAfterMs)} (since ${new Date(since).toISOString()}); last: ${o.result.error ?? 'unknown error'}`;
      const disabledFor = markEndpointFailure(db, o.endpointId, o.at, disableAfterMs, reason);
      if (disabledFor !== null) disabled.push({ endpoint: o.endpointId, reason: disabledFor });
    }
    for (const endpointId of [...successes.keys()]) flushSuccess(endpointId);
    return disabled;
  }
}

function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}
