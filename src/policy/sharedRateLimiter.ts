import type { Clock } from '../clock.js';
import { backendOf } from '../store/backendOf.js';
import type { Queries } from '../store/queries.js';
import {
  pruneRateWindows,
  type RateWindowLimit,
  rateWindowWait,
  recordRateWindow,
  releaseRateWindow,
  takeRateWindow,
} from '../store/rateWindows.js';
import type { RateSlot, RateWindow, Reservation } from './rateWindow.js';

/** SlidingWindowLimiter's answers for the cluster's events together, one round trip each; prunes run off the caller's path. */
export class SharedSlidingWindowLimiter implements RateWindow {
  private readonly window: RateWindowLimit;
  private nextPruneAt = Number.NEGATIVE_INFINITY;
  private pruning: Promise<void> = Promise.resolve();

  constructor(
    private readonly queries: Queries,
    /** Limiters of different names never share a window. */
    readonly name: string,
    readonly limit: number,
    readonly windowMs: number,
    private readonly clock: Clock,
    private readonly onPruneFailed: (err: Error) => void,
  ) {
    if (!backendOf(queries).capabilities.sharedRateWindows)
      throw new Error(
        'a shared rate window needs the PostgreSQL store; one node counts in memory (SlidingWindowLimiter)',
      );
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 2 ** 31 - 1)
      throw new RangeError(`limit must be a positive integer, not ${limit}`);
    if (!Number.isSafeInteger(windowMs) || windowMs < 1)
      throw new RangeError(`windowMs must be a positive integer, not ${windowMs}`);
    this.window = { limiter: name, maxEvents: limit, windowMs };
  }

  async take(key: string): Promise<number> {
    return (await this.reserve(key)).waitMs;
  }

  reserve(key: string): Promise<Reservation> {
    const now = this.clock.now();
    this.pruneNowAndThen(now);
    return takeRateWindow(this.queries, this.window, key, now);
  }

  release(key: string, slot: RateSlot): Promise<boolean> {
    return releaseRateWindow(this.queries, this.window, key, slot);
  }

  waitMs(key: string): Promise<number> {
    return rateWindowWait(this.queries, this.window, key, this.clock.now());
  }

  record(key: string): Promise<void> {
    const now = this.clock.now();
    this.pruneNowAndThen(now);
    return recordRateWindow(this.queries, this.window, key, now);
  }

  prune(): Promise<number> {
    return pruneRateWindows(this.queries, this.name, this.clock.now());
  }

  /** Before the pool closes, and in tests. */
  settled(): Promise<void> {
    return this.pruning;
  }

  private pruneNowAndThen(now: number): void {
    if (now < this.nextPruneAt) return;
    this.nextPruneAt = now + this.windowMs;
    // One prune at a time: a slow one is followed, not overlapped, by the next.
    this.pruning = this.pruning.then(() =>
      pruneRateWindows(this.queries, this.name, now).then(
        () => undefined,
        (err: unknown) => this.onPruneFailed(err instanceof Error ? err : new Error(String(err))),
      ),
    );
  }
}
