import { closeSync, fsyncSync, mkdirSync, openSync, renameSync } from 'node:fs';
import path from 'node:path';
import { syncDirectorySync } from './spool.js';
import type { SyncFilesystem } from './syncFilesystem.js';

/** A spool file written under its temp name, to be published under its final one. */
export interface PendingSpoolFile {
  tmpPath: string;
  finalPath: string;
}

/** Directories known to exist with a durable entry, so a day directory costs one fsync a day. */
const knownDirs = new Set<string>();

/**
 * Makes a group of temp files durable under their final names, before their index rows
 * commit. With syncfs (Linux documents it as fsync of every file on the filesystem) the group
 * is renamed into place and then flushed once: contents and directory entries together. A file
 * renamed but not yet flushed has no index row, so a crash in between leaves an orphan that
 * start-up removes, never a row without its file. Without syncfs each temp file is fsynced,
 * renamed, then each directory fsynced once for all renames into it. Returns, per file, null
 * once it is durable, or the error that kept it from being so (that file alone fails).
 */
export function publishSpoolFiles(files: PendingSpoolFile[], syncFilesystem: SyncFilesystem | null): (Error | null)[] {
  if (files.length === 0) return [];
  const results: (Error | null)[] = files.map(() => null);
  if (!syncFilesystem) {
    files.forEach((file, i) => {
      try {
        fsyncFile(file.tmpPath);
      } catch (err) {
        results[i] = err as Error;
      }
    });
  }
  files.forEach((file, i) => {
    if (results[i]) return;
    try {
      ensureDurableDirectory(path.dirname(file.finalPath));
      renameSync(file.tmpPath, file.finalPath);
    } catch (err) {
      results[i] = err as Error;
    }
  });
  if (syncFilesystem) {
    try {
      syncFilesystem(path.dirname(files[0].finalPath));
    } catch (err) {
      return files.map(() => err as Error);
    }
    return results;
  }
  const dirs = new Map<string, number[]>();
  files.forEach((file, i) => {
    if (results[i]) return;
    const dir = path.dirname(file.finalPath);
    const members = dirs.get(dir);
    if (members) members.push(i);
    else dirs.set(dir, [i]);
  });
  for (const [dir, members] of dirs) {
    try {
      syncDirectorySync(dir);
    } catch (err) {
      for (const i of members) results[i] = err as Error;
    }
  }
  return results;
}

function fsyncFile(file: string): void {
  const fd = openSync(file, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A day directory made here needs its own entry in the spool root made durable too. */
function ensureDurableDirectory(dir: string): void {
  if (knownDirs.has(dir)) return;
  if (mkdirSync(dir, { recursive: true, mode: 0o700 }) !== undefined) syncDirectorySync(path.dirname(dir));
  knownDirs.add(dir);
}
