/**
 * A small real filesystem for a test's state directory: a tmpfs of a few MiB the test mounts
 * (root only), filled to a chosen point with filler files. Used by the disk-full tests.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const isRoot = process.getuid?.() === 0;
export const NEEDS_ROOT = 'needs root to mount a small tmpfs for the state directory';

/** Mounts a tmpfs of `sizeMiB` on a new temp dir; `unmount` removes it again. */
export function mountSmallDisk(
  prefix: string,
  sizeMiB: number,
): { mount: string; unmount(): void } {
  const mount = mkdtempSync(path.join(tmpdir(), prefix));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m,mode=0700`, 'tmpfs', mount]);
  return {
    mount,
    unmount() {
      execFileSync('umount', [mount]);
      rmSync(mount, { recursive: true, force: true });
    },
  };
}

/** Bytes free on the filesystem of `dir` (what an unprivileged writer may use). */
export function freeBytes(dir: string): number {
  const fs = statfsSync(dir);
  return fs.bavail * fs.bsize;
}

/** Writes files into `dir` until the filesystem refuses (ENOSPC); returns them. */
export function fill(dir: string): string[] {
  return fillLeaving(dir, 0);
}

/**
 * Writes filler files into `dir` until about `leaveBytes` remain free (0: until ENOSPC, the last
 * blocks filled with small writes); returns them.
 */
export function fillLeaving(dir: string, leaveBytes: number): string[] {
  const files: string[] = [];
  for (const size of [64 * 1024, 512]) {
    const file = path.join(dir, `filler-${size}-${files.length}-${Date.now()}`);
    files.push(file);
    const fd = openSync(file, 'w');
    const block = Buffer.alloc(size, 0x61);
    try {
      while (leaveBytes === 0 || freeBytes(dir) - size >= leaveBytes) writeSync(fd, block);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
    } finally {
      closeSync(fd);
    }
    if (leaveBytes > 0) break;
  }
  return files;
}
