import type { Clock } from '../clock.js';
import { type RateSlot, type RateWindow, RELEASED_AT, type Reservation } from './rateWindow.js';

interface KeyWindow {
  /** A key forgotten and started afresh gets another, so an old slot never matches. */
  readonly id: number;
  times: number[];
  /** -1 for a place given back. */
  numbers: number[];
  writes: number;
  /** A place given back no longer shows it. */
  newest: number;
}

/** One node's sliding windows, in memory (policy/rateWindow.ts). */
export class SlidingWindowLimiter implements RateWindow {
  private readonly windows = new Map<string, KeyWindow>();
  private windowsMade = 0;
  private lastSweep = 0;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  waitMs(key: string): number {
    const w = this.windows.get(key);
    if (!w || w.times.length < this.limit) return 0;
    const oldest = w.times[this.oldestPlace(w)];
    return Math.max(0, oldest + this.windowMs - this.clock.now());
  }

  record(key: string): void {
    this.write(key);
  }

  take(key: string): number {
    return this.reserve(key).waitMs;
  }

  reserve(key: string): Reservation {
    const wait = this.waitMs(key);
    if (wait > 0) return { waitMs: wait, slot: null };
    return { waitMs: 0, slot: this.write(key) };
  }

  release(key: string, slot: RateSlot): boolean {
    const w = this.windows.get(key);
    if (!w || w.id !== slot.window) return false;
    const place = w.numbers.indexOf(slot.write);
    if (place < 0) return false;
    // The events older than it move one place newer; the oldest place is left free.
    const oldest = this.oldestPlace(w);
    for (let i = place; i !== oldest; ) {
      const older = (i - 1 + this.limit) % this.limit;
      w.times[i] = w.times[older];
      w.numbers[i] = w.numbers[older];
      i = older;
    }
    w.times[oldest] = RELEASED_AT;
    w.numbers[oldest] = -1;
    return true;
  }

  private oldestPlace(w: KeyWindow): number {
    return w.times.length < this.limit ? 0 : w.writes % this.limit;
  }

  private write(key: string): RateSlot {
    const now = this.clock.now();
    this.sweep(now);
    let w = this.windows.get(key);
    if (!w) {
      w = { id: this.windowsMade++, times: [], numbers: [], writes: 0, newest: now };
      this.windows.set(key, w);
    }
    const write = w.writes++;
    if (w.times.length < this.limit) {
      w.times.push(now);
      w.numbers.push(write);
    } else {
      w.times[write % this.limit] = now;
      w.numbers[write % this.limit] = write;
    }
    w.newest = Math.max(w.newest, now);
    return { window: w.id, write };
  }

  /** Memory follows active clients, not history. */
  private sweep(now: number): void {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    for (const [key, w] of this.windows) {
      if (w.newest + this.windowMs <= now) this.windows.delete(key);
    }
  }
}
