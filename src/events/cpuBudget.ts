import { readFileSync } from 'node:fs';
import os from 'node:os';

/** What the budget needs to know, in milliseconds of CPU time since some fixed point. */
export interface CpuReading {
  /** The calling thread's time on a CPU. */
  ownRunMs: number;
  /** Idle time summed over the machine's CPUs. */
  machineIdleMs: number;
}

const TICK_MS = 10; // /proc/stat counts in USER_HZ (100 per second on Linux)

/**
 * The calling thread's CPU time (Linux /proc/thread-self/schedstat, nanoseconds) and the
 * machine's idle time (/proc/stat, idle + iowait); null where they cannot be read (not Linux).
 */
export function readCpu(): CpuReading | null {
  try {
    const ownRunMs = Number(readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]) / 1e6;
    const stat = readFileSync('/proc/stat', 'latin1');
    const fields = stat.slice(0, stat.indexOf('\n')).split(/\s+/);
    // cpu user nice system idle iowait …
    const machineIdleMs = (Number(fields[4]) + Number(fields[5])) * TICK_MS;
    return Number.isFinite(ownRunMs) && Number.isFinite(machineIdleMs) ? { ownRunMs, machineIdleMs } : null;
  } catch {
    return null;
  }
}

interface Sample extends CpuReading {
  at: number;
}

/** Samples at least this far apart; the budget is judged over about WINDOW_MS of them. */
const SAMPLE_MS = 20;
const WINDOW_MS = 250;
/** Saturated: everything else together leaves less than this much of one core free. */
const FREE_CORE_SHARE = 0.5;
const MAX_HOLD_MS = 100;

/**
 * A CPU budget for background work that applies only while the machine is saturated. The
 * webhook thread's scheduling policy (SCHED_IDLE) gives the doors the CPU first, but not
 * completely: it still runs whenever its own CPU has nothing else queued for a moment, and
 * what it does there slows acceptance. So while everything else on the machine leaves less
 * than half a core free, the thread holds its own use to `share` of one core (webhooks lag,
 * and catch up when CPU frees); with CPU to spare it runs unthrottled.
 */
export class SaturationBudget {
  private readonly samples: Sample[] = [];

  constructor(
    private readonly share: number,
    private readonly read: () => CpuReading | null = readCpu,
    private readonly cores: number = os.availableParallelism(),
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Milliseconds to hold off before starting more work; 0: go ahead. */
  holdMs(): number {
    if (this.share >= this.cores) return 0;
    const now = this.now();
    const latest = this.samples[this.samples.length - 1];
    if (!latest || now - latest.at >= SAMPLE_MS) {
      const cpu = this.read();
      if (!cpu) return 0;
      this.samples.push({ at: now, ...cpu });
      // Keep one sample at least WINDOW_MS old as the window's start.
      while (this.samples.length > 2 && now - this.samples[1].at >= WINDOW_MS) this.samples.shift();
    }
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    const wallMs = last.at - first.at;
    if (wallMs < 4 * SAMPLE_MS) return 0;
    const ownMs = last.ownRunMs - first.ownRunMs;
    const othersMs = this.cores * wallMs - (last.machineIdleMs - first.machineIdleMs) - ownMs;
    if (othersMs < (this.cores - FREE_CORE_SHARE) * wallMs) return 0;
    // Saturated: hold until the window's average is back within the share.
    const excess = ownMs / this.share - (now - first.at);
    return excess > 0 ? Math.min(MAX_HOLD_MS, Math.ceil(excess)) : 0;
  }
}
