import { closeSync, fsyncSync, mkdirSync, openSync, opendirSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { SpooledMessage } from './writers.js';

/**
 * MIME files on disk: where they live, and how they are read and removed. A file is written
 * under a temp name and renamed into place by the index writer, which flushes the group's
 * files before it commits their rows (spool/publish.ts): a file has an index row only once its
 * bytes are on disk.
 */
export class Spool {
  readonly root: string;
  private readonly tmpDir: string;

  constructor(stateDir: string) {
    this.root = path.join(stateDir, 'spool');
    this.tmpDir = path.join(this.root, 'tmp');
    mkdirSync(this.tmpDir, { recursive: true, mode: 0o700 });
  }

  /** Day directories keep each commit's renames in one directory, so one fsync covers them. */
  relativePathFor(id: string, nowMs: number): string {
    return path.join(new Date(nowMs).toISOString().slice(0, 10), `${id}.eml`);
  }

  absolute(relPath: string): string {
    return path.join(this.root, relPath);
  }

  /** Temp files live in one directory on the same filesystem, so the rename is atomic. */
  tempPathFor(relPath: string): string {
    return path.join(this.tmpDir, `${path.basename(relPath)}.${process.pid}.tmp`);
  }

  async remove(relPath: string): Promise<void> {
    await rm(this.absolute(relPath), { force: true });
  }

  /** Removes a message's file that was not committed, under whichever name it reached. */
  async removeUnpublished(file: SpooledMessage): Promise<void> {
    await Promise.all([rm(file.tmpPath, { force: true }), this.remove(file.relPath)]);
  }

  removeSync(relPath: string): void {
    rmSync(this.absolute(relPath), { force: true });
  }


  /** Removes half-written temp files left by a crash; returns their names. */
  removeTempFiles(): string[] {
    const names = readdirSync(this.tmpDir);
    for (const name of names) rmSync(path.join(this.tmpDir, name), { force: true });
    return names;
  }

  /** Every spooled file as a path relative to the root (day directories only). */
  *listFiles(): Generator<string> {
    for (const day of readdirSync(this.root, { withFileTypes: true })) {
      if (!day.isDirectory() || !/^\d{4}-\d{2}-\d{2}$/.test(day.name)) continue;
      // Read entry by entry: a day directory can hold a whole queue's files.
      const dir = opendirSync(path.join(this.root, day.name));
      try {
        for (let entry = dir.readSync(); entry; entry = dir.readSync()) yield path.join(day.name, entry.name);
      } finally {
        dir.closeSync();
      }
    }
  }
}

/** Writes `data` to a new temp file (created exclusively, mode 0600); the caller removes it on failure. */
export function writeTempFileSync(tmpPath: string, data: Uint8Array): void {
  const fd = openSync(tmpPath, 'wx', 0o600);
  try {
    for (let offset = 0; offset < data.length; ) offset += writeSync(fd, data, offset, data.length - offset);
  } finally {
    closeSync(fd);
  }
}

export function syncDirectorySync(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
