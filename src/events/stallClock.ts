const TICK_MS = 50;
/** Lateness below this is ordinary timer jitter, not a stall. */
const SLACK_MS = 50;

/** Counts the time this thread's event loop could not run (SCHED_IDLE starved, a GC pause), so a deadline counts only watched time. */
export class StallClock {
  private stalledMs = 0;
  private last = 0;
  private users = 0;
  private timer: NodeJS.Timeout | null = null;

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

  /** Including a stall still being caught up on. */
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
