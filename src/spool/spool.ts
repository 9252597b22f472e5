import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, rmSync } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * MIME files on disk: where they live, and how they are read and removed. A file becomes
 * visible under its final name only after its bytes are on disk (temp → fsync → rename, in the
 * spool writer threads); the directory fsync that makes the rename durable is done by the
 * index writer, once per directory per commit, before the index row is committed.
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

  /**
   * Makes a temp file written elsewhere (the SMTP door streams into one) a spool file: fsync,
   * rename into its day directory. Returns the directory whose fsync makes the rename durable.
   */
  async adoptTemp(tmpPath: string, relPath: string): Promise<{ dir: string; size: number }> {
    const handle = await open(tmpPath, 'r+');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    const finalPath = this.absolute(relPath);
    const dir = path.dirname(finalPath);
    // A day directory made here needs its own entry made durable too (rare: once a day).
    if ((await mkdir(dir, { recursive: true, mode: 0o700 })) !== undefined) syncDirectorySync(this.root);
    await rename(tmpPath, finalPath);
    return { dir, size: (await stat(finalPath)).size };
  }

  async remove(relPath: string): Promise<void> {
    await rm(this.absolute(relPath), { force: true });
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
      for (const name of readdirSync(path.join(this.root, day.name))) yield path.join(day.name, name);
    }
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
