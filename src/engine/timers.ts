/** A pending wake-up. */
export interface Timer {
  cancel(): void;
}

/** What the engine waits on: real timers by default, a manual set in its tests. */
export interface EngineTimers {
  /** Milliseconds on a monotonic scale (gaps between exchanges, the failure log's period). */
  now(): number;
  after(ms: number, fn: () => void): Timer;
}

export const realTimers: EngineTimers = {
  now: () => performance.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    // The engine never keeps a process alive by itself: its owner's sockets and stop() decide.
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};
