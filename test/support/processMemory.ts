import { readFileSync, writeFileSync } from 'node:fs';

/** Resident set size of a process, in bytes (VmRSS, or VmHWM for the peak). */
export function memoryOf(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status);
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/** Resets the kernel's peak-RSS counter (VmHWM) of a process we own; false if not supported. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

export interface PeakRss {
  /** VmRSS when the watch started, in bytes. */
  baseline: number;
  /** The highest of the polled VmRSS and (where it could be reset) VmHWM, in bytes. */
  peak: number;
  polled: number;
  /** VmHWM since the watch started; null where the kernel would not reset it. */
  hwm: number | null;
}

/**
 * Watches a process's resident set over a stretch of work: VmRSS polled every `intervalMs`,
 * and the kernel's own peak (VmHWM), reset at the start where allowed, so no short spike
 * between two polls is missed. `stop()` gives the figures.
 */
export function watchPeakRss(
  pid: number,
  intervalMs = 20,
): { baseline: number; peakSoFar(): number; stop(): PeakRss } {
  const baseline = memoryOf(pid, 'VmRSS');
  const resettable = resetPeakRss(pid);
  let polled = baseline;
  const poll = setInterval(() => {
    try {
      polled = Math.max(polled, memoryOf(pid, 'VmRSS'));
    } catch {
      // the process is gone; whatever drives it fails and says so
    }
  }, intervalMs);
  return {
    baseline,
    /** The highest VmRSS polled so far, in bytes (the kernel's VmHWM is read at `stop`). */
    peakSoFar: () => Math.max(polled, memoryOf(pid, 'VmRSS')),
    stop() {
      clearInterval(poll);
      const hwm = resettable ? memoryOf(pid, 'VmHWM') : null;
      return { baseline, polled, hwm, peak: Math.max(polled, hwm ?? 0) };
    },
  };
}
