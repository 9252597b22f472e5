import type { Clock } from '../clock.js';

/**
 * A sliding-window limit: at most `limit` events per `windowMs` for each key, exactly (a ring of
 * the last `limit` timestamps per key). The wait it reports is truthful: once it has passed,
 * the oldest event has left the window and the next event is admitted.
 */
export class SlidingWindowLimiter {
  private readonly windows = new Map<string, { times: number[]; next: number }>();
  private lastSweep = 0;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  /** Milliseconds until `key` may have another event; 0 when it may now. */
  waitMs(key: string): number {
    const w = this.windows.get(key);
    if (!w || w.times.length < this.limit) return 0;
    const oldest = w.times[w.next];
    return Math.max(0, oldest + this.windowMs - this.clock.now());
  }

  record(key: string): void {
    const now = this.clock.now();
    this.sweep(now);
    let w = this.windows.get(key);
    if (!w) {
      w = { times: [], next: 0 };
      this.windows.set(key, w);
    }
    if (w.times.length < this.limit) {
      w.times.push(now);
    } else {
      w.times[w.next] = now;
      w.next = (w.next + 1) % this.limit;
    }
  }

  /** Records an event unless the key is over its limit; returns the wait in ms (0 = admitted). */
  take(key: string): number {
    const wait = this.waitMs(key);
    if (wait === 0) this.record(key);
    return wait;
  }

  /** Forgets keys idle for a whole window, so memory follows active clients, not history. */
  private sweep(now: number): void {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    for (const [key, w] of this.windows) {
      const newest = w.times[(w.next + w.times.length - 1) % w.times.length];
      if (newest + this.windowMs <= now) this.windows.delete(key);
    }
  }
}
