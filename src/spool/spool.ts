import {
  closeSync,
  constants,
  createWriteStream,
  fsyncSync,
  opendirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  type WriteStream,
  writeSync,
} from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Logger } from '../log.js';
import {
  checkOwnEntry,
  ensurePrivateDirectory,
  ensurePrivateSubdirectory,
} from '../platform/privateFiles.js';

/**
 * MIME files on disk: where they live, and how they are read and removed. A file is written
 * under a temp name and renamed into place by the index writer, which flushes the group's
 * files before it commits their rows (spool/publish.ts): a file has an index row only once its
 * bytes are on disk.
 */
export class Spool {
  readonly root: string;
  private readonly tmpDir: string;
  private readonly freeDir: string;
  /** Retired files (empty) ready for the next messages; see retire(). */
  private readonly free: string[] = [];
  private retiring = 0;
  private freeSeq = 0;
  private readonly runTag = `${process.pid}-${Date.now().toString(36)}`;

  /**
   * The state directory made private first (`logger` warns when it was tightened), then the
   * spool's directories: each created 0700, or checked (no link, Postern's own; privateFiles.ts).
   */
  constructor(stateDir: string, logger?: Logger) {
    this.root = path.join(stateDir, 'spool');
    this.tmpDir = path.join(this.root, 'tmp');
    this.freeDir = path.join(this.root, 'free');
    ensurePrivateDirectory(stateDir, logger);
    for (const dir of [this.root, this.tmpDir, this.freeDir]) ensurePrivateSubdirectory(dir);
  }

  /**
   * Takes the retired files a previous run left (start-up), up to the cap; removes the rest.
   * Returns how many were kept. Each is checked first: new mail is written into them.
   */
  adoptFreeFiles(): number {
    for (const name of readdirSync(this.freeDir)) {
      const file = path.join(this.freeDir, name);
      checkOwnEntry(file, 'file');
      if (this.free.length < REUSE_CAP) this.free.push(file);
      else rmSync(file, { force: true });
    }
    return this.free.length;
  }

  /**
   * A retired file for a new message to be written into (writeTempFileSync), if one is ready.
   * A task that fails before writing leaves it in free/, where the next start adopts it.
   */
  takeFree(): string | undefined {
    return this.free.pop();
  }

  /** A file from takeFree that was not written after all. */
  returnFree(file: string): void {
    this.free.push(file);
  }

  /**
   * Removes a message's file for good (retention). Up to REUSE_CAP files are emptied and kept
   * for the next messages instead of unlinked: on ext4 without a journal, every create scans
   * past each inode freed in the last minutes (`recently_deleted()`), so removing files at the
   * rate messages arrive made every new spool file expensive in kernel time; a reused one costs
   * two renames (measured: docs/architecture.md, "Measured figures"). Emptied first, a kept
   * file holds none of the old message.
   */
  async retire(relPath: string): Promise<void> {
    if (this.free.length + this.retiring >= REUSE_CAP) return this.remove(relPath);
    const target = path.join(this.freeDir, `${this.runTag}.${++this.freeSeq}`);
    this.retiring++;
    try {
      // Emptied under its old name: a file in free/ never holds a message. (Never through a link.)
      const file = await open(this.absolute(relPath), constants.O_WRONLY | constants.O_NOFOLLOW);
      try {
        await file.truncate(0);
      } finally {
        await file.close();
      }
      await rename(this.absolute(relPath), target);
      this.free.push(target);
    } catch {
      await Promise.all([this.remove(relPath), rm(target, { force: true })]);
    } finally {
      this.retiring--;
    }
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
  async removeUnpublished(file: { tmpPath: string; relPath: string }): Promise<void> {
    await Promise.all([rm(file.tmpPath, { force: true }), this.remove(file.relPath)]);
  }

  removeSync(relPath: string): void {
    rmSync(this.absolute(relPath), { force: true });
  }

  /** Removes a temp file (tempPathFor) that was never handed to the index writer. */
  removeTempSync(tmpPath: string): void {
    rmSync(tmpPath, { force: true });
  }

  /** Removes half-written temp files left by a crash (each checked: Postern's own file); returns their names. */
  removeTempFiles(): string[] {
    const names = readdirSync(this.tmpDir);
    for (const name of names) checkOwnEntry(path.join(this.tmpDir, name), 'file');
    for (const name of names) rmSync(path.join(this.tmpDir, name), { force: true });
    return names;
  }

  /**
   * Every spooled file as a path relative to the root (day directories only), each day directory
   * and file checked as it comes (no link, Postern's own; a refusal is a StateFileError).
   */
  *listFiles(): Generator<string> {
    for (const day of readdirSync(this.root, { withFileTypes: true })) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(day.name)) continue;
      const dayDir = path.join(this.root, day.name);
      ensurePrivateSubdirectory(dayDir);
      // Read entry by entry: a day directory can hold a whole queue's files.
      const dir = opendirSync(dayDir);
      try {
        for (let entry = dir.readSync(); entry; entry = dir.readSync()) {
          checkOwnEntry(path.join(dayDir, entry.name), 'file');
          yield path.join(day.name, entry.name);
        }
      } finally {
        dir.closeSync();
      }
    }
  }
}

/** How many retired files the spool keeps for reuse (each an empty inode). */
export const REUSE_CAP = 10_000;

/**
 * Writes `data` to the temp file `tmpPath`: the retired file `reuse` renamed there when one was
 * given and is still there, else a new file (created exclusively, mode 0600). The caller
 * removes `tmpPath` on failure.
 */
export function writeTempFileSync(tmpPath: string, data: Uint8Array, reuse?: string): void {
  const fd = openTempFileSync(tmpPath, reuse);
  try {
    for (let offset = 0; offset < data.length; )
      offset += writeSync(fd, data, offset, data.length - offset);
  } finally {
    closeSync(fd);
  }
}

/**
 * A stream into the new temp file `tmpPath` (created exclusively, mode 0600), for a message
 * written on the event loop as it arrives. The caller removes `tmpPath` on failure.
 */
export function createTempFileStream(tmpPath: string): WriteStream {
  return createWriteStream(tmpPath, { flags: 'wx', mode: 0o600 });
}

/** Bytes gathered before one write: a small message is one write, a big one never held whole. */
const WRITE_BATCH_BYTES = 256 * 1024;

/**
 * Writes the chunks of `source` to the temp file `tmpPath` (opened as writeTempFileSync does) as
 * they come, gathered into writes of WRITE_BATCH_BYTES; resolves with the bytes written. The
 * caller removes `tmpPath` on failure. ('data' events: `for await` cost a small message about
 * 50 µs more of the writer thread.)
 */
export function writeTempFileFrom(
  tmpPath: string,
  source: Readable,
  reuse?: string,
): Promise<number> {
  const fd = openTempFileSync(tmpPath, reuse);
  let size = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  // The stream's chunks are small (a header, a few base64 lines): copied into one write.
  const flush = () => {
    const data = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingBytes);
    for (let offset = 0; offset < data.length; )
      offset += writeSync(fd, data, offset, data.length - offset);
    pending = [];
    pendingBytes = 0;
  };
  return new Promise<number>((resolve, reject) => {
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      source.destroy();
      try {
        closeSync(fd);
      } catch {
        // Closed already, or unclosable: the caller removes the file either way.
      }
      reject(err);
    };
    source.on('data', (chunk: Buffer) => {
      if (failed) return;
      pending.push(chunk);
      pendingBytes += chunk.length;
      size += chunk.length;
      try {
        if (pendingBytes >= WRITE_BATCH_BYTES) flush();
      } catch (err) {
        fail(err);
      }
    });
    source.once('error', fail);
    source.once('end', () => {
      if (failed) return;
      try {
        if (pendingBytes > 0) flush();
      } catch (err) {
        return fail(err);
      }
      failed = true;
      try {
        closeSync(fd);
      } catch (err) {
        return reject(err);
      }
      resolve(size);
    });
  });
}

function openTempFileSync(tmpPath: string, reuse?: string): number {
  return reuse !== undefined && claimRetired(reuse, tmpPath)
    ? openSync(tmpPath, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW)
    : openSync(tmpPath, 'wx', 0o600);
}

function claimRetired(reuse: string, tmpPath: string): boolean {
  try {
    renameSync(reuse, tmpPath);
    return true;
  } catch {
    return false;
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
