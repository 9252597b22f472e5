import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface CpuReading {
  ownRunMs: number;
  /** idle + iowait, summed over the machine's CPUs. */
  machineIdleMs: number;
}

const TICK_MS = 10; // /proc/stat counts in USER_HZ

/** null where they cannot be read (not Linux). */
export function readCpu(): CpuReading | null {
  try {
    const ownRunMs =
      Number(readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]) / 1e6;
    const stat = readFileSync('/proc/stat', 'latin1');
    const fields = stat.slice(0, stat.indexOf('\n')).split(/\s+/);
    // cpu user nice system idle iowait …
    const machineIdleMs = (Number(fields[4]) + Number(fields[5])) * TICK_MS;
    return Number.isFinite(ownRunMs) && Number.isFinite(machineIdleMs)
      ? { ownRunMs, machineIdleMs }
      : null;
  } catch {
    return null;
  }
}

interface Sample extends CpuReading {
  at: number;
}

const SAMPLE_MS = 20;
const WINDOW_MS = 250;
const FREE_CORE_SHARE = 0.5;
const MAX_HOLD_MS = 100;

/**
 * Holds the webhook thread to `share` of a core while the machine is saturated: SCHED_IDLE alone still
 * slowed acceptance (docs/architecture.md#webhooks).
 */
export class SaturationBudget {
  private readonly samples: Sample[] = [];

  constructor(
    private readonly share: number,
    private readonly read: () => CpuReading | null = readCpu,
    private readonly cores: number = os.availableParallelism(),
    private readonly now: () => number = () => performance.now(),
  ) {}

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
    const excess = ownMs / this.share - (now - first.at);
    return excess > 0 ? Math.min(MAX_HOLD_MS, Math.ceil(excess)) : 0;
  }
}
