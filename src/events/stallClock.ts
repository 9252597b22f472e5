/** How often the clock looks at the event loop while someone needs it. */
const TICK_MS = 50;
/** Lateness below this is ordinary timer jitter, not a stall. */
const SLACK_MS = 50;

/**
 * Counts the time this thread's event loop could not run (a starved SCHED_IDLE thread on a
 * saturated machine, a long GC pause), so a deadline can count only the time the thread was
 * able to watch. It ticks only while at least one user holds it.
 */
export class StallClock {
  private stalledMs = 0;
  private last = 0;
  private users = 0;
  private timer: NodeJS.Timeout | null = null;

  /** Starts watching (for one more user); returns the stall total so far. */
  acquire(): number {
    if (this.users++ === 0) {
      this.last = performance.now();
      this.timer = setInterval(() => this.sample(), TICK_MS);
      this.timer.unref();
    }
    return this.sample();
  }

  release(): void {
    if (--this.users > 0) return;
    this.users = 0;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** The stall total, including a stall still being caught up on (ticks overdue right now). */
  sample(): number {
    if (this.users === 0) return this.stalledMs;
    const now = performance.now();
    const late = now - this.last - TICK_MS;
    if (late > SLACK_MS) this.stalledMs += late;
    // Only whole missed ticks move `last`: an early sample must not hide the next tick's lateness.
    if (now - this.last >= TICK_MS) this.last = now;
    return this.stalledMs;
  }
}
