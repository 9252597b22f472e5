import { closeSync, fsyncSync, mkdirSync, openSync, renameSync } from 'node:fs';
import path from 'node:path';
import { syncDirectorySync } from './spool.js';
import type { SyncFilesystem } from './syncFilesystem.js';

export interface PendingSpoolFile {
  tmpPath: string;
  finalPath: string;
}

/** So a day directory costs one fsync a day. */
const knownDirs = new Set<string>();

/**
 * Makes temp files durable under their final names before their index rows commit: with syncfs, renamed then flushed once;
 * a crash in between leaves an orphan start-up removes, never a row without its file. Per file, null or its error.
 */
export function publishSpoolFiles(
  files: PendingSpoolFile[],
  syncFilesystem: SyncFilesystem | null,
): (Error | null)[] {
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

function ensureDurableDirectory(dir: string): void {
  if (knownDirs.has(dir)) return;
  if (mkdirSync(dir, { recursive: true, mode: 0o700 }) !== undefined)
    syncDirectorySync(path.dirname(dir));
  knownDirs.add(dir);
}
