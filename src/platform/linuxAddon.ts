import { createRequire } from 'node:module';

/** What the addon built at install (native/linux.c) offers. */
export interface LinuxAddon {
  /** Flushes every dirty file and directory of the filesystem holding `path` (syncfs(2)). */
  syncfs(path: string): void;
  /** Moves the calling thread to SCHED_IDLE: it runs only on CPU time nothing else wants. */
  idleScheduling(): void;
}

const addonPath = new URL('../../../native/build/Release/linux.node', import.meta.url);
let loaded: LinuxAddon | null | undefined;

/** The addon, or null where it was not built (not Linux, or no C toolchain at install). */
export function linuxAddon(): LinuxAddon | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.platform === 'linux') {
    try {
      loaded = createRequire(import.meta.url)(addonPath.pathname) as LinuxAddon;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}
