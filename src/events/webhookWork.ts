import type { Clock } from '../clock.js';
import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import {
  fanOutPlan,
  fanOutQueued,
  type WebhookBookkeeping,
  type WebhookBookkeepingResult,
  type WebhookOutcomeRecord,
} from '../commit/webhookBookkeeping.js';
import type { PosternConfig } from '../config/load.js';
import type { ExchangeRequest, ExchangeResult, LeasedWorkHandler } from '../engine/handler.js';
import { LeasedWork } from '../engine/leasedWork.js';
import type { EngineTimers } from '../engine/timers.js';
import type { Logger } from '../log.js';
import {
  eventsAfter,
  latestEventSeq,
  type OutboxEvent,
  outboxEvent,
  outboxEvents,
  webhookCursor,
} from '../store/eventOutbox.js';
import type { Queries } from '../store/queries.js';
import { type ClaimedDelivery, hasDueDelivery } from '../store/webhookDeliveries.js';
import { registeredWebhookEndpoints, type WebhookEndpointRow } from '../store/webhookEndpoints.js';
import { SaturationBudget } from './cpuBudget.js';
import { envelopeBody } from './envelope.js';
import { retryDelayMs } from './ladder.js';
import { type AttemptResult, WebhookSender } from './sender.js';
import type { Resolver } from './targets.js';

/** Gap between two dispatcher writes while there is work; doubles while acceptance commits, up to MAX_WRITE_GAP_MS. */
const MIN_WRITE_GAP_MS = 25;
const MAX_WRITE_GAP_MS = 200;
/** Claimed per endpoint per round of its concurrency per 5 ms of write gap: enough to last until the next write. */
const PREFETCH_ROUNDS_MIN = 5;
const PRUNE_EVERY_MS = 3600_000;
const CURSOR_PERSIST_MS = 5000;
const PRUNE_CHUNK = 5000;
/** A failing index read or write (a full disk) is retried ever more slowly up to this, logged once a minute. */
const FAILURE_MAX_DELAY_MS = 5000;
const FAILURE_LOG_PERIOD_MS = 60_000;

export interface DispatcherDeps {
  /** Its reads, on its thread's own connection. */
  store: Queries;
  /** Its writes: one transaction per cycle, run by the index writer thread. */
  bookkeeping: Bookkeeping;
  clock: Clock;
  logger: Logger;
  config: Pick<PosternConfig, 'webhooks'>;
  /** PostgreSQL: the owner of the leases it claims. */
  nodeId: string;
  /** PostgreSQL: counts recorded outcomes for GET /metrics (on SQLite the index writer thread does). */
  countOutcomes?: (outcomes: WebhookOutcomeKind[]) => void;
  resolver?: Resolver;
  ca?: string | Buffer;
  random?: () => number;
  timers?: EngineTimers;
}

export type WebhookOutcomeKind = 'delivered' | 'retry' | 'failed';

interface Outcome {
  delivery: ClaimedDelivery;
  endpointId: string;
  at: number;
  result: AttemptResult;
  permanent: boolean;
  durationMs: number;
}

/** A claimed delivery with its event (undefined: not read yet; null: gone from the outbox). */
type QueuedDelivery = ClaimedDelivery & { event: OutboxEvent | null | undefined };

const isLocked = (err: unknown) => {
  const code = (err as { code?: string }).code ?? '';
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
};

export interface WebhookEngine {
  start(): Promise<void>;
  kick(): void;
  stop(): Promise<void>;
}

export function webhookEngine(deps: DispatcherDeps): WebhookEngine {
  const c = deps.config.webhooks;
  const work = new WebhookWork(deps);
  const engine = new LeasedWork(work, {
    logger: deps.logger,
    timers: deps.timers,
    concurrency: c.concurrency,
    perKey: c.per_endpoint_concurrency,
    pollMs: c.poll_interval_ms,
    groupMs: 0,
    failure: {
      message: 'webhook dispatcher write failed',
      maxDelayMs: FAILURE_MAX_DELAY_MS,
      logPeriodMs: FAILURE_LOG_PERIOD_MS,
    },
  });
  let started = false;
  let stopped = false;
  return {
    async start() {
      if (started) return;
      started = true;
      await work.open();
      if (!stopped) engine.start();
    },
    kick: () => engine.kick(),
    async stop() {
      if (!started || stopped) return;
      stopped = true;
      await engine.stop();
      work.close();
    },
  };
}

/**
 * Webhooks' handler on the leased-work engine: fan-out, claims, attempts, outcomes (docs/architecture.md#webhooks).
 * It only reads; its writes go to the index writer thread, so at idle priority it never holds the write lock acceptance waits for.
 */
class WebhookWork implements LeasedWorkHandler<QueuedDelivery, Outcome> {
  private readonly store: Queries;
  private readonly shared: boolean;
  private readonly sender: WebhookSender;
  private lastWrite = 0;
  private writeGap = MIN_WRITE_GAP_MS;
  /** The latest row of each endpoint with work here (a rotated secret is used at once). */
  private readonly endpoints = new Map<string, WebhookEndpointRow>();
  private cursor = 0;
  private cursorDirty = false;
  private lastPrune = 0;
  private cycles = 0;
  private readonly leaseMs: number;
  private readonly random: () => number;
  private readonly budget: SaturationBudget;

  constructor(private readonly deps: DispatcherDeps) {
    this.store = deps.store;
    this.shared = deps.bookkeeping.sharedByNodes;
    const c = deps.config.webhooks;
    this.leaseMs = Math.max(c.lease_ms, c.timeout_ms + 2000);
    this.random = deps.random ?? Math.random;
    this.budget = new SaturationBudget(c.saturated_cpu_share);
    this.sender = new WebhookSender({
      timeoutMs: c.timeout_ms,
      policy: { allowPrivate: c.allow_private_targets },
      maxSocketsPerEndpoint: c.per_endpoint_concurrency,
      resolver: deps.resolver,
      ca: deps.ca,
      now: () => deps.clock.now(),
    });
  }

  async open(): Promise<void> {
    // PostgreSQL has no cursor: events not yet fanned out wait in the outbox's queue.
    this.cursor = this.shared ? 0 : await webhookCursor(this.store);
    this.lastPrune = this.deps.clock.now() - PRUNE_EVERY_MS + 60_000;
    this.deps.logger.info(
      {
        cursor: this.cursor,
        allow_private_targets: this.deps.config.webhooks.allow_private_targets,
      },
      'webhook dispatcher started',
    );
  }

  close(): void {
    this.sender.close();
    this.deps.bookkeeping.close();
  }

  idOf(d: QueuedDelivery): number {
    return d.seq;
  }

  keyOf(d: QueuedDelivery): string {
    return d.endpoint_id;
  }

  spacingMs(): number {
    return Math.max(0, this.lastWrite + this.writeGap - Date.now());
  }

  holdMs(): number {
    return this.budget.holdMs();
  }

  /** Outcomes wait for the next write whatever failed: nothing is recorded twice. */
  afterFailure(_err: unknown, outcome: Outcome): Outcome {
    return outcome;
  }

  inDoubt(err: unknown): boolean {
    return this.deps.bookkeeping.inDoubt(err);
  }

  async exchange(request: ExchangeRequest<Outcome>): Promise<ExchangeResult<QueuedDelivery>> {
    if (!request.lease) return this.finalWrite(request.outcomes);
    const { clock, config } = this.deps;
    const c = config.webhooks;
    const store = this.store;
    const now = clock.now();
    const prefetch =
      c.per_endpoint_concurrency * Math.max(PREFETCH_ROUNDS_MIN, Math.ceil(this.writeGap / 5));
    const claimedOn = (id: string) => request.perKey.get(id) ?? 0;
    const wantsClaim = (e: WebhookEndpointRow) =>
      e.disabled_at === null && prefetch - claimedOn(e.id) >= c.per_endpoint_concurrency;
    // Events are read BEFORE the endpoints: an endpoint missing from the list was registered
    // after these events were visible, so its from_seq excludes them all.
    const queued = this.shared && (await fanOutQueued(store));
    const latest = this.shared ? 0 : await latestEventSeq(store);
    // No endpoint at all: the cursor passes the events up to `latest` unread (an endpoint
    // registered after this read has a from_seq of at least `latest`).
    const none =
      !this.shared &&
      latest > this.cursor &&
      (await registeredWebhookEndpoints(store)).length === 0;
    if (none) {
      this.cursor = latest;
      this.cursorDirty = true;
    }
    const events = latest > this.cursor ? await eventsAfter(store, this.cursor, c.batch_size) : [];
    const pruneDue = now - this.lastPrune >= PRUNE_EVERY_MS;
    const registered = await registeredWebhookEndpoints(store);
    const dropKeys = this.refreshEndpoints(registered, request.perKey);
    this.closeIdleAgents(registered);
    const wanted = queued || (events.length > 0 && fanOutPlan(registered, events).length > 0);
    if (events.length > 0 && !wanted) {
      this.cursor = events[events.length - 1].seq;
      this.cursorDirty = true;
    }
    const persistCursor = this.cursorDirty && Date.now() - this.lastWrite >= CURSOR_PERSIST_MS;
    let claimable = false;
    for (const e of registered) {
      if (wantsClaim(e) && (await hasDueDelivery(store, e.id, now))) {
        claimable = true;
        break;
      }
    }
    if (!wanted && !claimable && request.outcomes.length === 0 && !pruneDue && !persistCursor)
      return { leased: [], more: latest > this.cursor, dropKeys };
    const room: Record<string, number> = {};
    for (const [id, n] of request.perKey) room[id] = prefetch - n;
    const work: WebhookBookkeeping = {
      ...this.bookkeepingBase(now),
      outcomes: this.outcomeRecords(request.outcomes),
      fanOut: wanted && !queued ? events : [],
      cursor:
        wanted && !queued ? events[events.length - 1].seq : this.cursorDirty ? this.cursor : null,
      fanOutQueued: queued ? c.batch_size : 0,
      claims: {
        room,
        defaultRoom: prefetch,
        minRoom: c.per_endpoint_concurrency,
        leaseUntil: now + this.leaseMs,
      },
      prune: pruneDue ? { before: now - c.retention_days * 86_400_000, limit: PRUNE_CHUNK } : null,
    };
    const { result, acceptanceBusy } = await this.deps.bookkeeping.write('webhooks', work);
    return this.written(work, result, acceptanceBusy, latest, dropKeys);
  }

  private async written(
    work: WebhookBookkeeping,
    result: WebhookBookkeepingResult,
    acceptanceBusy: boolean,
    latest: number,
    dropKeys: string[],
  ): Promise<ExchangeResult<QueuedDelivery>> {
    const { logger, config } = this.deps;
    this.lastWrite = Date.now();
    this.writeGap = acceptanceBusy
      ? Math.min(MAX_WRITE_GAP_MS, this.writeGap * 2)
      : Math.max(MIN_WRITE_GAP_MS, Math.floor(this.writeGap / 2));
    this.countRecorded(work.outcomes, result.recorded);
    // No other exchange ran while the write was in flight: the cursor has not moved since.
    if (work.cursor !== null) {
      this.cursor = work.cursor;
      this.cursorDirty = false;
    }
    if (work.prune) {
      if (result.pruned < work.prune.limit) this.lastPrune = work.now;
      if (result.pruned > 0)
        logger.info({ removed: result.pruned }, 'finished webhook deliveries pruned');
    }
    for (const d of result.disabled) {
      logger.warn({ endpoint_id: d.endpoint, reason: d.reason }, 'webhook endpoint disabled');
      const endpoint = this.endpoints.get(d.endpoint);
      if (endpoint)
        this.endpoints.set(d.endpoint, {
          ...endpoint,
          disabled_at: work.now,
          disabled_reason: d.reason,
        });
      dropKeys.push(d.endpoint);
    }
    for (const { endpoint } of result.claimed) this.endpoints.set(endpoint.id, endpoint);
    const rows = result.claimed.flatMap(({ rows }) => rows);
    const events = await this.readEvents(rows);
    const leased = rows.map((d) => ({
      ...d,
      event: d.event_seq === null ? null : events ? (events.get(d.event_seq) ?? null) : undefined,
    }));
    const more =
      result.fannedOut === config.webhooks.batch_size || latest > this.cursor || rows.length > 0;
    return { leased, more, dropKeys };
  }

  private async finalWrite(outcomes: Outcome[]): Promise<ExchangeResult<QueuedDelivery>> {
    if (outcomes.length > 0 || this.cursorDirty) {
      const records = this.outcomeRecords(outcomes);
      const { result } = await this.deps.bookkeeping.write('webhooks', {
        ...this.bookkeepingBase(this.deps.clock.now()),
        outcomes: records,
        cursor: this.cursorDirty ? this.cursor : null,
      });
      this.countRecorded(records, result.recorded);
      this.cursorDirty = false;
    }
    return { leased: [], more: false };
  }
  private countRecorded(outcomes: WebhookOutcomeRecord[], recorded: number[] | null): void {
    if (!this.deps.countOutcomes || recorded === null || recorded.length === 0) return;
    const left = new Set(recorded);
    const kinds = outcomes
      .filter((o) => left.delete(o.seq))
      .map(
        (o): WebhookOutcomeKind =>
          o.ok ? 'delivered' : o.nextAttemptAt !== null ? 'retry' : 'failed',
      );
    if (kinds.length > 0) this.deps.countOutcomes(kinds);
  }

  private bookkeepingBase(now: number): WebhookBookkeeping {
    return {
      now,
      outcomes: [],
      disableAfterMs: this.deps.config.webhooks.disable_after_seconds * 1000,
      fanOut: [],
      cursor: null,
      fanOutQueued: 0,
      node: this.deps.nodeId,
      claims: { room: {}, defaultRoom: 0, minRoom: 1, leaseUntil: now },
      prune: null,
    };
  }

  private outcomeRecords(outcomes: Outcome[]): WebhookOutcomeRecord[] {
    const c = this.deps.config.webhooks;
    return outcomes.map((o) => {
      const wait =
        o.result.ok || o.permanent
          ? null
          : retryDelayMs(
              o.delivery.attempts + 1,
              c.retry_ladder_seconds,
              c.retry_jitter,
              o.result.retryAfterMs,
              this.random,
            );
      if (!o.result.ok && wait === null && !o.permanent) {
        this.deps.logger.warn(
          {
            delivery_id: o.delivery.id,
            endpoint_id: o.endpointId,
            attempts: o.delivery.attempts + 1,
            error: o.result.error,
          },
          'webhook delivery failed after its last attempt',
        );
      }
      return {
        seq: o.delivery.seq,
        endpointId: o.endpointId,
        at: o.at,
        ok: o.result.ok,
        status: o.result.status,
        error: o.result.error,
        answer: o.result.answer ?? null,
        nextAttemptAt: wait === null ? null : o.at + wait,
        countsAgainstEndpoint: !o.permanent,
        deliveryId: o.delivery.id,
        type: o.delivery.type,
        attempt: o.delivery.attempts + 1,
        durationMs: o.durationMs,
      };
    });
  }

  /** Endpoints as registered now; a disabled or removed endpoint's waiting deliveries are let go. Answers their keys. */
  private refreshEndpoints(
    registered: WebhookEndpointRow[],
    load: ReadonlyMap<string, number>,
  ): string[] {
    const byId = new Map(registered.map((e) => [e.id, e]));
    const drop: string[] = [];
    for (const id of load.keys()) {
      const current = byId.get(id);
      if (!current || current.disabled_at !== null) drop.push(id);
    }
    for (const id of this.endpoints.keys())
      if (!byId.has(id) && !load.has(id)) this.endpoints.delete(id);
    for (const [id, e] of byId) if (this.endpoints.has(id)) this.endpoints.set(id, e);
    return drop;
  }

  private closeIdleAgents(registered: WebhookEndpointRow[]): void {
    if (++this.cycles % 500 !== 0) return;
    this.sender.forgetEndpointsExcept(new Set(registered.map((e) => e.id)));
  }

  /** The events of a claim, in one read; null if that read failed (each attempt then reads its own). */
  private async readEvents(rows: ClaimedDelivery[]): Promise<Map<number, OutboxEvent> | null> {
    const seqs = rows.flatMap((d) => (d.event_seq === null ? [] : [d.event_seq]));
    if (seqs.length === 0) return new Map();
    try {
      return await outboxEvents(this.store, seqs);
    } catch (err) {
      this.deps.logger.warn({ err }, 'webhook events not read with their claim; read one by one');
      return null;
    }
  }

  /** One signed POST; null when the outbox was unreadable (no attempt: due again after the lease). */
  async run(delivery: QueuedDelivery): Promise<Outcome | null> {
    const { clock, logger } = this.deps;
    const endpoint = this.endpoints.get(delivery.endpoint_id);
    if (!endpoint) return null;
    const started = performance.now();
    let result: AttemptResult;
    let permanent = false;
    try {
      const ev =
        delivery.event_seq === null
          ? undefined
          : delivery.event === undefined
            ? await outboxEvent(this.store, delivery.event_seq)
            : (delivery.event ?? undefined);
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
        logger.error(
          { delivery_id: delivery.id, event_seq: delivery.event_seq, reason: broken },
          'webhook delivery cannot be built; failed',
        );
      } else {
        const now = clock.now();
        const secrets = [endpoint.secret];
        if (
          endpoint.previous_secret &&
          endpoint.previous_secret_expires_at !== null &&
          endpoint.previous_secret_expires_at > now
        )
          secrets.push(endpoint.previous_secret);
        result = await this.sender.send(endpoint.id, {
          url: endpoint.url,
          deliveryId: delivery.id,
          type: delivery.type,
          body,
          secrets,
          timestamp: Math.floor(now / 1000),
        });
      }
    } catch (err) {
      if (isLocked(err)) return null;
      result = {
        ok: false,
        status: null,
        error: `internal error: ${(err as Error).message}`,
        retryAfterMs: null,
        refused: false,
      };
    }
    if (!result.ok)
      logger.debug(
        {
          delivery_id: delivery.id,
          endpoint_id: endpoint.id,
          attempt: delivery.attempts + 1,
          error: result.error,
        },
        'webhook attempt failed',
      );
    return {
      delivery,
      endpointId: endpoint.id,
      at: clock.now(),
      result,
      permanent,
      durationMs: Math.round(performance.now() - started),
    };
  }
}
