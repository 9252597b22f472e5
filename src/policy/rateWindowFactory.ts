import type { Clock } from '../clock.js';
import { backendOf } from '../store/backendOf.js';
import type { Queries } from '../store/queries.js';
import { SlidingWindowLimiter } from './rateLimiter.js';
import type { RateWindow } from './rateWindow.js';
import { SharedSlidingWindowLimiter } from './sharedRateLimiter.js';

/**
 * The one place a node's sliding windows are made (the send API's, the console's sign-in
 * limits, the public viewer's): counted in this process's memory on one node, by every node
 * together where they share the store, so a client spreading its attempts over the nodes gets no more than
 * one node would give it.
 *
 * It keeps every shared window it made, those a reload has since replaced included, so the
 * node can wait for their background prunes before its store closes.
 */
export class RateWindowFactory {
  private readonly shared: SharedSlidingWindowLimiter[] = [];

  constructor(
    private readonly store: Queries,
    private readonly clock: Clock,
    /** Told when a shared window's background prune fails; it is tried again a window later. */
    private readonly onPruneFailed: (err: Error) => void = () => undefined,
  ) {}

  /** A window of `limit` events per `windowMs` per key; `name` keeps limiters apart (on PostgreSQL, across nodes). */
  window(name: string, limit: number, windowMs: number): RateWindow {
    if (!backendOf(this.store).capabilities.sharedRateWindows) return new SlidingWindowLimiter(limit, windowMs, this.clock);
    const window = new SharedSlidingWindowLimiter(this.store, name, limit, windowMs, this.clock, this.onPruneFailed);
    this.shared.push(window);
    return window;
  }

  /** Resolves when the shared windows' background prunes have ended: before the store closes. */
  async settled(): Promise<void> {
    await Promise.all(this.shared.map((w) => w.settled()));
  }
}
