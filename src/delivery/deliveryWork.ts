import { readFileSync } from 'node:fs';
import { buffer } from 'node:stream/consumers';
import type { Clock } from '../clock.js';
import type { Bookkeeping, BookkeepingResults } from '../commit/bookkeepingChannel.js';
import {
  type DeliveryBookkeeping,
  type DeliveryRecord,
  type DeliveryWrite,
  type FinishSending,
  type MailEventRecord,
  mailRef,
} from '../commit/deliveryBookkeeping.js';
import type { PosternConfig } from '../config/load.js';
import type { ProviderAccount } from '../contract/providerAccount.js';
import type { ExchangeRequest, ExchangeResult, LeasedWorkHandler } from '../engine/handler.js';
import { KeyedSlots } from '../engine/keyedSlots.js';
import { LeasedWork } from '../engine/leasedWork.js';
import type { EngineTimers } from '../engine/timers.js';
import type { Logger } from '../log.js';
import { countHandoff } from '../platform/metrics.js';
import type {
  DeliveryJob,
  ProviderAdapter,
  RecipientRefusal,
  SendResult,
  StoredMimeOfJob,
} from '../providers/adapter.js';
import { providerUsage } from '../store/delivery.js';
import type { EventType } from '../store/events.js';
import { storedMime } from '../store/messageBodies.js';
import type { MessageRow } from '../store/messages.js';
import { listNodes, nodeState } from '../store/nodes.js';
import { getProject, type ProjectRow } from '../store/projects.js';
import { listProviderAccounts } from '../store/providerAccounts.js';
import type { Queries } from '../store/queries.js';
import { suppressedAmong } from '../store/suppressions.js';
import { monthPeriod } from '../store/usage.js';
import { orderCandidates, type Strategy } from './routing.js';

export interface DeliveryDeps {
  /** For reads only: every write goes to the index writer thread through `bookkeeping`. */
  store: Queries;
  bookkeeping: Bookkeeping;
  /** The owner of its leases on PostgreSQL. */
  nodeId: string;
  spoolRoot: string;
  clock: Clock;
  logger: Logger;
  config: Pick<PosternConfig, 'delivery'>;
  adapterFor(slug: string): ProviderAdapter | undefined;
  /** DKIM-Signature header lines for the message, or null when no key applies. */
  sign(projectId: string, fromDomain: string, stored: StoredMimeOfJob): Promise<string | null>;
  timers?: EngineTimers;
}

/** Messages up to this size are held in memory for their hand-off instead of streamed. */
const HELD_MIME_BYTES = 256 * 1024;

const NODES_READ_MS = 5000;

/** How long outcomes wait to share one exchange (one transaction) with the index writer. */
const WRITE_GROUPING_MS = 5;
/** A failing exchange (a full disk) is retried ever more slowly up to this, logged once a minute. */
const FAILURE_MAX_DELAY_MS = 5000;
const FAILURE_LOG_PERIOD_MS = 60_000;

export interface Delivery {
  engine: LeasedWork<MessageRow, DeliveryWrite>;
  handOffs: HandOffs;
}

export function createDelivery(deps: DeliveryDeps): Delivery {
  const handOffs = new HandOffs(deps);
  const { delivery } = deps.config;
  const engine = new LeasedWork(handOffs, {
    logger: deps.logger,
    timers: deps.timers,
    concurrency: delivery.concurrency,
    // One lane: the per-account limit is taken during the hand-off (KeyedSlots), once its candidate is known.
    perKey: delivery.concurrency,
    pollMs: delivery.poll_interval_ms,
    groupMs: WRITE_GROUPING_MS,
    failure: {
      message: 'delivery bookkeeping failed; tried again',
      maxDelayMs: FAILURE_MAX_DELAY_MS,
      logPeriodMs: FAILURE_LOG_PERIOD_MS,
    },
  });
  return { engine, handOffs };
}

/**
 * Delivery's handler on the leased-work engine (docs/architecture.md#delivery). It only reads the index; its
 * writes go to the index writer thread. Ends carried by an exchange in doubt (database away) are sent again until one commits.
 */
export class HandOffs implements LeasedWorkHandler<MessageRow, DeliveryWrite> {
  private readonly slots: KeyedSlots;
  private readonly rotation = new Map<string, number>();
  private lastExpirySweep = 0;
  private afterCommit: (() => void)[] = [];
  /** What each hand-off in progress has recorded so far, written with its end; one object per lease. */
  private readonly records = new Map<MessageRow, DeliveryRecord[]>();
  private readonly reserved = new Map<string, number>();
  /** Accounts a provider throttled (429 with reset headers): not tried again before then. */
  private readonly throttledUntil = new Map<string, number>();
  private lastNodesRead = 0;

  constructor(private readonly deps: DeliveryDeps) {
    this.slots = new KeyedSlots(deps.config.delivery.per_account_concurrency);
  }

  throttledAccounts(): number {
    const now = this.deps.clock.now();
    let n = 0;
    for (const until of this.throttledUntil.values()) if (until > now) n++;
    return n;
  }

  accountThrottledUntil(accountId: string): number | null {
    return this.throttledUntil.get(accountId) ?? null;
  }

  idOf(row: MessageRow): string {
    return row.id;
  }

  keyOf(): string {
    return '';
  }

  spacingMs(): number {
    return 0;
  }

  inDoubt(err: unknown): boolean {
    return this.deps.bookkeeping.inDoubt(err);
  }

  /** Database away: an end is kept, first in line, as tried (its commit may have landed); anything else refused is dropped. */
  afterFailure(err: unknown, w: DeliveryWrite): DeliveryWrite | null {
    if (!this.deps.bookkeeping.inDoubt(err)) return null;
    return w.kind === 'finish' ? { ...w, retried: true } : w;
  }

  async exchange(request: ExchangeRequest<DeliveryWrite>): Promise<ExchangeResult<MessageRow>> {
    const { clock, config, bookkeeping, nodeId } = this.deps;
    const now = clock.now();
    const work: DeliveryBookkeeping = {
      writes: request.outcomes,
      expire: null,
      lease: null,
      reclaim: null,
    };
    if (request.lease) {
      if (now - this.lastExpirySweep >= 1000) {
        this.lastExpirySweep = now;
        work.expire = {
          createdBefore: now - config.delivery.max_age_seconds * 1000,
          at: now,
          limit: 500,
        };
      }
      const free = config.delivery.concurrency - request.running;
      const want = Math.min(free, config.delivery.batch_size);
      // Lease in batches: when busy, wait until a good share of the slots is free, so one
      // claim (one small transaction) feeds many hand-offs.
      if (
        want > 0 &&
        (request.running === 0 ||
          want >= Math.ceil(Math.min(config.delivery.concurrency, config.delivery.batch_size) / 2))
      ) {
        work.lease = { node: nodeId, now, leaseUntil: now + config.delivery.lease_ms, limit: want };
      }
      if (request.reclaim)
        work.reclaim = {
          node: nodeId,
          now,
          leaseUntil: now + config.delivery.lease_ms,
          holding: [...request.held].map(String),
        };
      if (bookkeeping.sharedByNodes && now - this.lastNodesRead >= NODES_READ_MS) {
        this.lastNodesRead = now;
        void this.takeConcurrencyShare(now);
      }
    }
    if (work.writes.length === 0 && !work.expire && !work.lease && !work.reclaim)
      return { leased: [], more: false };
    const after = this.afterCommit.splice(0);
    let result: BookkeepingResults['delivery'];
    try {
      ({ result } = await bookkeeping.write('delivery', work));
    } catch (err) {
      if (bookkeeping.inDoubt(err)) this.afterCommit.unshift(...after);
      else for (const fn of after) fn();
      throw err;
    }
    for (const fn of after) fn();
    // Throttles any node was told (PostgreSQL): the leased messages' candidates skip them too.
    for (const [accountId, until] of result.throttled) {
      if (until > (this.throttledUntil.get(accountId) ?? 0))
        this.throttledUntil.set(accountId, until);
    }
    if (result.reclaimed.length > 0)
      this.deps.logger.warn(
        { messages: result.reclaimed.length },
        'took back messages a lease gave this node while the database was going away; handing them off',
      );
    return {
      leased: [...result.reclaimed, ...result.leased],
      more: work.lease !== null && result.leased.length === work.lease.limit,
    };
  }

  /** per_account_concurrency is the cluster's: this node takes ceil(limit / nodes up) (docs/scaling.md); SQLite takes it all. */
  private async takeConcurrencyShare(now: number): Promise<void> {
    try {
      const nodes = await listNodes(this.deps.store);
      const up =
        nodes.filter((n) => n.id !== this.deps.nodeId && nodeState(n, now) === 'up').length + 1;
      this.slots.setLimit(Math.ceil(this.deps.config.delivery.per_account_concurrency / up));
    } catch (err) {
      this.deps.logger.warn(
        { err },
        "could not count the nodes up; keeping this node's share of per_account_concurrency",
      );
    }
  }

  async run(row: MessageRow, emit: (w: DeliveryWrite) => void): Promise<DeliveryWrite> {
    try {
      return await this.handOff(row, emit);
    } catch (err) {
      this.deps.logger.error(
        { err, message_id: row.id },
        'delivery failed unexpectedly; retrying later',
      );
      return this.retryOrFail(
        row,
        this.deps.clock.now(),
        `internal error: ${(err as Error).message}`,
      );
    }
  }

  private async handOff(row: MessageRow, emit: (w: DeliveryWrite) => void): Promise<DeliveryWrite> {
    const { store, clock } = this.deps;
    const project = await getProject(store, row.project_id);
    const recipients = JSON.parse(row.recipients) as DeliveryJob['recipients'];
    const all = row.pending_recipients
      ? (JSON.parse(row.pending_recipients) as string[])
      : [...new Set([...recipients.to, ...recipients.cc, ...recipients.bcc])];
    // Suppression is checked again at hand-off: an address may have bounced since acceptance.
    const suppressed = new Set(
      (await suppressedAmong(store, row.project_id, all)).map((e) => e.toLowerCase()),
    );
    const deliverTo = all.filter((e) => !suppressed.has(e.toLowerCase()));
    const now = clock.now();
    if (suppressed.size > 0) {
      for (const email of all.filter((e) => suppressed.has(e.toLowerCase()))) {
        this.record(row, {
          kind: 'recipient',
          outcome: {
            message_id: row.id,
            email,
            status: 'suppressed',
            reply: null,
            created_at: now,
          },
        });
        this.record(row, {
          kind: 'event',
          event: this.event(row, 'mail.suppressed', now, { suppressed: { recipient: email } }),
        });
      }
      if (deliverTo.length === 0)
        return this.ending(
          row,
          { status: 'suppressed', next_attempt_at: null, last_error: 'all recipients suppressed' },
          now,
        );
    }
    if (!project)
      return this.ending(
        row,
        { status: 'failed', next_attempt_at: null, last_error: 'project deleted' },
        now,
      );
    const routing = JSON.parse(row.routing) as {
      provider: string | string[] | null;
      strategy: string | null;
    };
    const accounts = await listProviderAccounts(store, row.project_id);
    const strategy = (routing.strategy ?? project.strategy) as Strategy;
    // Read before the order is chosen: from here to the reservation below nothing awaits.
    const used = new Map<string, number>();
    if (routing.provider === null && strategy === 'free-first') {
      for (const a of accounts)
        if (a.free_quota !== null)
          used.set(a.id, await providerUsage(store, a.id, monthPeriod(now)));
    }
    const candidates = orderCandidates(
      accounts,
      routing.provider,
      strategy,
      {
        nextRotation: (id) => {
          const n = this.rotation.get(id) ?? 0;
          this.rotation.set(id, n + 1);
          return n;
        },
        hasFreeAllowance: (a) =>
          a.free_quota !== null &&
          (used.get(a.id) ?? 0) + (this.reserved.get(a.id) ?? 0) < a.free_quota,
        random: Math.random,
      },
      row.project_id,
    );
    if (candidates.length === 0)
      return this.retryOrFail(
        row,
        now,
        routing.provider
          ? 'no attached provider matches the pinned routing'
          : 'no_providers_configured',
      );
    // The free allowance is reserved before any await, so messages handed off together never spend
    // more of it than there is; released once the exchange counting the usage has committed.
    const reservedOn = candidates[0].free_quota !== null ? candidates[0].id : null;
    if (reservedOn) this.reserved.set(reservedOn, (this.reserved.get(reservedOn) ?? 0) + 1);
    try {
      return await this.tryCandidates(row, project, candidates, recipients, deliverTo, all, emit);
    } finally {
      if (reservedOn)
        this.afterCommit.push(() =>
          this.reserved.set(reservedOn, (this.reserved.get(reservedOn) ?? 1) - 1),
        );
    }
  }

  private async tryCandidates(
    row: MessageRow,
    project: ProjectRow,
    candidates: ProviderAccount[],
    recipients: DeliveryJob['recipients'],
    deliverTo: string[],
    all: string[],
    emit: (w: DeliveryWrite) => void,
  ): Promise<DeliveryWrite> {
    const { clock, spoolRoot } = this.deps;
    const stored = await storedMime(this.deps.store, spoolRoot, row);
    // A small message is read once, whole, and serves signing and every candidate (docs/architecture.md#delivery).
    const small = row.size_bytes <= HELD_MIME_BYTES;
    const source: StoredMimeOfJob =
      'held' in stored
        ? { mime: stored.held }
        : 'open' in stored
          ? small
            ? { mime: await buffer(stored.open()) }
            : { mime: null, openMime: stored.open }
          : small
            ? { mime: readFileSync(stored.file) }
            : { mime: null, mimePath: stored.file };
    const signature = await this.deps.sign(
      row.project_id,
      row.from_email.slice(row.from_email.lastIndexOf('@') + 1).toLowerCase(),
      source,
    );
    const job: DeliveryJob = {
      ...source,
      messageId: row.id,
      prependHeaders: signature ?? '',
      envelope: { from: row.from_email, to: deliverTo },
      providerOptions: row.provider_options
        ? (JSON.parse(row.provider_options) as Record<string, Record<string, string>>)
        : null,
      recipients,
      tags: JSON.parse(row.tags) as string[],
      metadata: JSON.parse(row.metadata) as Record<string, string>,
      category: row.category,
    };
    let last = 'no attempt';
    for (const account of candidates) {
      const adapter = this.deps.adapterFor(account.slug);
      const started = clock.now();
      let result: SendResult;
      const throttled = this.throttledUntil.get(account.id);
      if (!adapter) {
        result = { kind: 'account', reply: `no adapter for ${account.slug} in this release` };
      } else if (throttled !== undefined && throttled > started) {
        // Not an attempt the provider sees: it asked us to wait.
        last = `${account.slug}: throttled until ${new Date(throttled).toISOString()}`;
        continue;
      } else {
        await this.slots.acquire(account.id);
        const handOffStarted = performance.now();
        try {
          result = await adapter.send(job, account);
        } finally {
          this.slots.release(account.id);
        }
        countHandoff(account.slug, result.kind, (performance.now() - handOffStarted) / 1000);
      }
      const finished = clock.now();
      if (
        result.kind === 'temporary' &&
        result.retryAfterMs !== undefined &&
        result.retryAfterMs > 0
      ) {
        this.throttledUntil.set(account.id, finished + result.retryAfterMs);
        // Every node must rest the account, not only this one.
        if (this.deps.bookkeeping.sharedByNodes)
          emit({ kind: 'throttle', accountId: account.id, until: finished + result.retryAfterMs });
      }
      this.record(row, {
        kind: 'attempt',
        attempt: {
          message_id: row.id,
          provider_account_id: account.id,
          provider_slug: account.slug,
          started_at: started,
          finished_at: finished,
          outcome: result.kind,
          reply: result.reply,
          provider_message_id: result.kind === 'sent' ? result.providerMessageId : null,
        },
      });
      last = `${account.slug}: ${result.reply}`;
      const bounced = 'bounced' in result ? (result.bounced ?? []) : [];
      if (bounced.length > 0) {
        this.bounce(row, project, account, bounced, finished);
        const gone = new Set(bounced.map((b) => b.email.toLowerCase()));
        job.envelope.to = job.envelope.to.filter((e) => !gone.has(e.toLowerCase()));
      }
      if (result.kind === 'sent' || result.kind === 'permanent' || job.envelope.to.length === 0)
        return this.finish(row, account, result, finished);
    }
    const remaining = job.envelope.to;
    const now = clock.now();
    const resets = candidates.map((a) => this.throttledUntil.get(a.id) ?? 0);
    const notBefore = resets.every((t) => t > now) ? Math.min(...resets) : 0;
    return this.retryOrFail(
      row,
      now,
      last,
      remaining.length === all.length ? undefined : remaining,
      undefined,
      notBefore,
    );
  }

  /** Recipients refused permanently at RCPT: bounced, and suppressed for the project. */
  private bounce(
    row: MessageRow,
    project: ProjectRow,
    account: ProviderAccount,
    bounced: RecipientRefusal[],
    now: number,
  ): void {
    for (const r of bounced) {
      this.record(row, {
        kind: 'recipient',
        outcome: {
          message_id: row.id,
          email: r.email,
          status: 'bounced',
          reply: r.reply,
          created_at: now,
        },
      });
      this.record(row, {
        kind: 'suppress',
        suppression: {
          project_id: project.id,
          email: r.email,
          reason: 'hard_bounce',
          created_at: now,
        },
      });
      this.record(row, {
        kind: 'event',
        event: this.event(row, 'mail.bounced', now, {
          bounce: { recipient: r.email, type: 'hard', reply: r.reply, provider: account.slug },
        }),
      });
    }
  }

  private finish(
    row: MessageRow,
    account: ProviderAccount,
    result: SendResult,
    now: number,
  ): DeliveryWrite {
    if (result.kind === 'sent') {
      this.record(row, { kind: 'usage', accountId: account.id, period: monthPeriod(now) });
      this.record(row, {
        kind: 'event',
        event: this.event(row, 'mail.sent', now, {
          provider: account.slug,
          provider_message_id: result.providerMessageId,
        }),
      });
      if (result.deferred.length > 0) {
        return this.retryOrFail(
          row,
          now,
          `${account.slug}: ${result.deferred.map((d) => `${d.email}: ${d.reply}`).join('; ')}`,
          result.deferred.map((d) => d.email),
          {
            provider_slug: account.slug,
            provider_message_id: result.providerMessageId,
          },
        );
      }
      return this.ending(
        row,
        {
          status: 'sent',
          next_attempt_at: null,
          provider_slug: account.slug,
          provider_message_id: result.providerMessageId,
          last_error: null,
          pending_recipients: null,
        },
        now,
      );
    }
    return this.ending(
      row,
      {
        status: 'failed',
        next_attempt_at: null,
        provider_slug: account.slug,
        last_error: result.reply,
      },
      now,
      this.event(row, 'mail.failed', now, {
        failure: { reason: 'rejected', message: result.reply, provider: account.slug },
      }),
    );
  }

  /** Back on the retry ladder, or `failed` when the next try would pass its maximum age. */
  private retryOrFail(
    row: MessageRow,
    now: number,
    reason: string,
    pending?: string[],
    provider?: { provider_slug: string; provider_message_id: string | null },
    notBefore = 0,
  ): DeliveryWrite {
    const { config } = this.deps;
    const ladder = config.delivery.retry_ladder_seconds;
    const wait = Math.max(
      ladder[Math.min(Math.max(row.attempts - 1, 0), ladder.length - 1)] * 1000,
      notBefore - now,
    );
    if (now + wait - row.created_at > config.delivery.max_age_seconds * 1000) {
      return this.ending(
        row,
        { status: 'failed', next_attempt_at: null, last_error: reason, ...provider },
        now,
        this.event(row, 'mail.failed', now, { failure: { reason: 'expired', message: reason } }),
      );
    }
    return this.ending(
      row,
      {
        status: 'queued',
        next_attempt_at: now + wait,
        last_error: reason,
        pending_recipients: pending,
        ...provider,
      },
      now,
    );
  }

  /** On PostgreSQL only while this node still holds the lease. */
  private ending(
    row: MessageRow,
    to: FinishSending,
    at: number,
    event: MailEventRecord | null = null,
  ): DeliveryWrite {
    const records = this.records.get(row) ?? [];
    this.records.delete(row);
    return { kind: 'finish', id: row.id, to, at, event, node: this.deps.nodeId, records };
  }

  /** Written with the hand-off's end: one write that lands whole or, retried after the database went away, not twice. */
  private record(row: MessageRow, r: DeliveryRecord): void {
    const list = this.records.get(row);
    if (list) list.push(r);
    else this.records.set(row, [r]);
  }

  private event(
    row: MessageRow,
    type: EventType,
    at: number,
    extra: Record<string, unknown>,
  ): MailEventRecord {
    return { message: mailRef(row), type, at, extra };
  }
}
