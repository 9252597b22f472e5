import type { Logger } from '../log.js';
import { RepeatedFailure } from '../platform/repeatedFailure.js';
import type { ExchangeRequest, LeasedWorkHandler, WorkId } from './handler.js';
import { type EngineTimers, realTimers, type Timer } from './timers.js';

export interface LeasedWorkOptions {
  logger: Logger;
  timers?: EngineTimers;
  concurrency: number;
  perKey: number;
  pollMs: number;
  /** How long outcomes gathered during an exchange wait after it for more (one transaction for many). */
  groupMs: number;
  /** A failing exchange is retried ever more slowly up to this, logged once per period. */
  failure: { message: string; maxDelayMs: number; logPeriodMs: number };
}

interface Pending<O> {
  outcome: O;
  /** null: an outcome along the way. */
  releases: WorkId | null;
}

interface Lane<I> {
  waiting: I[];
  running: number;
}

/**
 * The leased-work engine delivery and webhooks share (docs/architecture.md#the-leased-work-engine). One exchange
 * at a time; a kick during one is never lost. The store never hands this node an item it holds twice.
 */
export class LeasedWork<I, O> {
  private readonly timers: EngineTimers;
  private readonly failure: RepeatedFailure;
  private readonly lanes = new Map<string, Lane<I>>();
  private readonly held = new Set<WorkId>();
  private pending: Pending<O>[] = [];
  private running = 0;
  private rotation = 0;
  private timer: Timer | null = null;
  private timerAt = Infinity;
  private holdTimer: Timer | null = null;
  private exchanging: Promise<void> | null = null;
  private soon = false;
  private failing = false;
  private leaseInDoubt = false;
  private started = false;
  private stopping = false;
  private readonly idle: (() => void)[] = [];

  constructor(
    private readonly handler: LeasedWorkHandler<I, O>,
    private readonly options: LeasedWorkOptions,
  ) {
    this.timers = options.timers ?? realTimers;
    this.failure = new RepeatedFailure(
      options.logger,
      options.failure.message,
      {
        minDelayMs: options.pollMs,
        maxDelayMs: Math.max(options.pollMs, options.failure.maxDelayMs),
        logPeriodMs: options.failure.logPeriodMs,
      },
      () => this.timers.now(),
    );
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.wake(0);
  }

  kick(): void {
    if (this.failing || this.stopping) return;
    // One in flight: it may have read before this work was due, so the next comes when it returns.
    if (this.exchanging) this.soon = true;
    else this.wake(0);
  }

  figures(): { running: number; held: number; waiting: number } {
    let waiting = 0;
    for (const lane of this.lanes.values()) waiting += lane.waiting.length;
    return { running: this.running, held: this.held.size, waiting };
  }

  /** Waiting work is let go (its lease runs out); running work finishes; outcomes go in a last exchange (one try). */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.timer?.cancel();
    this.timer = null;
    await this.exchanging;
    this.holdTimer?.cancel();
    this.holdTimer = null;
    this.letWaitingGo();
    if (this.running > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    if (this.pending.length > 0) await this.exchange();
    if (this.pending.length > 0)
      this.options.logger.error(
        { outcomes: this.pending.length },
        `${this.options.failure.message}: outcomes not recorded at shutdown; that work will be done again`,
      );
  }

  /** An earlier wake stands; none while one is in flight: its return decides. */
  private wake(ms: number): void {
    if (!this.started || this.stopping || this.exchanging) return;
    const at = this.timers.now() + ms;
    if (this.timer && this.timerAt <= at) return;
    this.timer?.cancel();
    this.timerAt = at;
    this.timer = this.timers.after(ms, () => {
      this.timer = null;
      this.timerAt = Infinity;
      void this.exchange();
    });
  }

  private outcomesDelay(): number {
    return Math.max(this.options.groupMs, this.handler.spacingMs());
  }

  private async exchange(): Promise<void> {
    if (this.exchanging) return;
    const pending = this.pending.splice(0);
    const lease = !this.stopping;
    const reclaim = lease && this.leaseInDoubt;
    const perKey = new Map<string, number>();
    for (const [key, lane] of this.lanes) perKey.set(key, lane.waiting.length + lane.running);
    const request: ExchangeRequest<O> = {
      outcomes: pending.map((p) => p.outcome),
      lease,
      running: this.running,
      perKey,
      held: this.held,
      reclaim,
    };
    this.soon = false;
    let next: number;
    const done = this.handler.exchange(request).then(
      (result) => {
        this.failure.succeeded();
        this.failing = false;
        if (reclaim) this.leaseInDoubt = false;
        for (const p of pending) if (p.releases !== null) this.held.delete(p.releases);
        for (const key of result.dropKeys ?? []) this.drop(key);
        // Never twice: an item this node still holds (its lease ran out while it ran) is not run again.
        for (const item of result.leased) {
          const id = this.handler.idOf(item);
          if (this.held.has(id)) continue;
          this.held.add(id);
          this.enqueue(item);
        }
        this.pump();
        next = result.more || this.soon ? this.handler.spacingMs() : this.options.pollMs;
      },
      (err: unknown) => {
        next = this.failure.failed(err);
        this.failing = true;
        if (lease && this.handler.inDoubt(err)) this.leaseInDoubt = true;
        const kept: Pending<O>[] = [];
        for (const p of pending) {
          const again = this.handler.afterFailure(err, p.outcome);
          if (again !== null) kept.push({ outcome: again, releases: p.releases });
          else if (p.releases !== null) this.held.delete(p.releases);
        }
        this.pending.unshift(...kept);
      },
    );
    this.exchanging = done.finally(() => {
      this.exchanging = null;
      if (this.failing) this.wake(next);
      else this.wake(this.pending.length > 0 ? Math.min(next, this.outcomesDelay()) : next);
    });
    await this.exchanging;
  }

  private enqueue(item: I): void {
    const key = this.handler.keyOf(item);
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = { waiting: [], running: 0 };
      this.lanes.set(key, lane);
    }
    lane.waiting.push(item);
  }

  private drop(key: string): void {
    const lane = this.lanes.get(key);
    if (!lane) return;
    for (const item of lane.waiting) this.held.delete(this.handler.idOf(item));
    lane.waiting.length = 0;
    if (lane.running === 0) this.lanes.delete(key);
  }

  private letWaitingGo(): void {
    for (const key of [...this.lanes.keys()]) this.drop(key);
  }

  private pump(): void {
    if (this.holdTimer || this.lanes.size === 0) return;
    const hold = this.stopping ? 0 : (this.handler.holdMs?.() ?? 0);
    if (hold > 0) {
      this.holdTimer = this.timers.after(hold, () => {
        this.holdTimer = null;
        this.pump();
      });
      return;
    }
    const lanes = [...this.lanes.entries()];
    const start = this.rotation++ % lanes.length;
    let progressed = true;
    while (progressed && this.running < this.options.concurrency) {
      progressed = false;
      for (let i = 0; i < lanes.length && this.running < this.options.concurrency; i++) {
        const [key, lane] = lanes[(start + i) % lanes.length];
        if (lane.waiting.length === 0 || lane.running >= this.options.perKey) continue;
        const item = lane.waiting.shift()!;
        lane.running++;
        this.running++;
        progressed = true;
        void this.run(key, lane, item);
      }
    }
    if (this.stopping) this.letWaitingGo();
  }

  private async run(key: string, lane: Lane<I>, item: I): Promise<void> {
    const id = this.handler.idOf(item);
    let final: O | null = null;
    try {
      final = await this.handler.run(item, (outcome) => this.add({ outcome, releases: null }));
    } catch (err) {
      // A handler records its own failures as outcomes; one that escapes is let go (its lease runs out).
      this.options.logger.error(
        { err, work: id },
        'leased work failed unexpectedly; left to its lease',
      );
    }
    lane.running--;
    this.running--;
    if (lane.running === 0 && lane.waiting.length === 0 && this.lanes.get(key) === lane)
      this.lanes.delete(key);
    if (final === null) this.held.delete(id);
    else this.add({ outcome: final, releases: id });
    if (this.running === 0) for (const resolve of this.idle.splice(0)) resolve();
    if (this.stopping) return;
    this.pump();
    if (final === null) this.kick();
  }

  private add(p: Pending<O>): void {
    this.pending.push(p);
    if (!this.failing) this.wake(this.handler.spacingMs());
  }
}
