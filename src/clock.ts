/** The one clock. Everything time-dependent (scheduled sends, key expiry, quota periods) reads it. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * A clock shifted by a fixed offset; `POSTERN_CLOCK_OFFSET_MS` uses it so a whole process
 * (server or CLI) can be moved in time for tests without faking the OS clock.
 */
export function offsetClock(offsetMs: number): Clock {
  return { now: () => Date.now() + offsetMs };
}

/** A clock tests set and advance by hand. */
export class ManualClock implements Clock {
  constructor(private ms: number) {}
  now(): number {
    return this.ms;
  }
  set(ms: number | string | Date): void {
    this.ms = typeof ms === 'number' ? ms : new Date(ms).getTime();
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export function clockFromEnvironment(env: NodeJS.ProcessEnv = process.env): Clock {
  const raw = env.POSTERN_CLOCK_OFFSET_MS;
  if (raw === undefined || raw === '') return systemClock;
  const offset = Number(raw);
  if (!Number.isFinite(offset))
    throw new Error('POSTERN_CLOCK_OFFSET_MS must be a number of milliseconds');
  return offsetClock(offset);
}
