import { linuxAddon } from '../platform/linuxAddon.js';

/** Flushes every dirty file and directory of the filesystem holding `path` (syncfs(2)). */
export type SyncFilesystem = (path: string) => void;

/** How a commit group's spool files are flushed before their rows commit: one syncfs after the renames, or one fsync each before. */
export type SpoolSync = 'syncfs' | 'fsync';

/**
 * syncfs(2) from the addon built at install (native/linux.c), or null where it was not built
 * (not Linux, or no C toolchain): the spool then fsyncs its files one by one, equally durable.
 */
export function loadSyncFilesystem(): SyncFilesystem | null {
  const addon = linuxAddon();
  return addon ? (path) => addon.syncfs(path) : null;
}
