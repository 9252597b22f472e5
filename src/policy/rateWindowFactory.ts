import type { Clock } from '../clock.js';
import { backendOf } from '../store/backendOf.js';
import type { Queries } from '../store/queries.js';
import { SlidingWindowLimiter } from './rateLimiter.js';
import type { RateWindow } from './rateWindow.js';
import { SharedSlidingWindowLimiter } from './sharedRateLimiter.js';

/** The one place sliding windows are made: in memory on one node, shared by every node on PostgreSQL. Keeps them to await their prunes. */
export class RateWindowFactory {
  private readonly shared: SharedSlidingWindowLimiter[] = [];

  constructor(
    private readonly store: Queries,
    private readonly clock: Clock,
    private readonly onPruneFailed: (err: Error) => void = () => undefined,
  ) {}

  /** `name` keeps limiters apart (on PostgreSQL, across nodes). */
  window(name: string, limit: number, windowMs: number): RateWindow {
    if (!backendOf(this.store).capabilities.sharedRateWindows)
      return new SlidingWindowLimiter(limit, windowMs, this.clock);
    const window = new SharedSlidingWindowLimiter(
      this.store,
      name,
      limit,
      windowMs,
      this.clock,
      this.onPruneFailed,
    );
    this.shared.push(window);
    return window;
  }

  async settled(): Promise<void> {
    await Promise.all(this.shared.map((w) => w.settled()));
  }
}
