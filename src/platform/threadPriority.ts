import os from 'node:os';
import { linuxAddon } from './linuxAddon.js';

/**
 * Lowers the calling worker thread's priority (Linux: a scheduling policy and a nice value
 * belong to the thread; elsewhere a nice value would apply to the whole process, so nothing is
 * done). `idle`: SCHED_IDLE through the native addon (it runs only on CPU time nothing else
 * wants), or nice 19 without it; a number: that nice value. Returns the error when it could not.
 */
export function lowerThreadPriority(setting: 'idle' | number): Error | null {
  if (process.platform !== 'linux' || setting === 0) return null;
  const addon = setting === 'idle' ? linuxAddon() : null;
  try {
    if (addon) addon.idleScheduling();
    else os.setPriority(Math.max(os.getPriority(), setting === 'idle' ? 19 : setting));
    return null;
  } catch (err) {
    return err as Error;
  }
}
