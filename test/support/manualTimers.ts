import type { ManualClock } from '../../src/clock.js';
import type { EngineTimers, Timer } from '../../src/engine/timers.js';

/** Lets promise callbacks and I/O callbacks queued so far run (no time passes on the manual clock). */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * The engine's timers on a ManualClock: nothing fires until the test moves the clock, then
 * every timer due fires in time order, the clock standing at its time, with the promise
 * callbacks it set off settled before the next.
 */
export class ManualTimers implements EngineTimers {
  private readonly due: { at: number; seq: number; fn: () => void; cancelled: boolean }[] = [];
  private seq = 0;

  constructor(readonly clock: ManualClock) {}

  now(): number {
    return this.clock.now();
  }

  after(ms: number, fn: () => void): Timer {
    const entry = { at: this.clock.now() + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.due.push(entry);
    return { cancel: () => (entry.cancelled = true) };
  }

  /** When the next timer is due (Infinity: none). */
  nextAt(): number {
    const live = this.due.filter((t) => !t.cancelled);
    return live.length === 0 ? Infinity : Math.min(...live.map((t) => t.at));
  }

  /** Moves the clock by `ms`, firing what falls due on the way. */
  async advance(ms: number): Promise<void> {
    const until = this.clock.now() + ms;
    await settle();
    for (;;) {
      const next = this.due
        .filter((t) => !t.cancelled && t.at <= until)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.due.splice(this.due.indexOf(next), 1);
      if (next.at > this.clock.now()) this.clock.set(next.at);
      next.fn();
      await settle();
    }
    this.clock.set(until);
    await settle();
  }
}
