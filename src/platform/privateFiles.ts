/**
 * The state directory holds secrets in clear, so it is private and what another user may have planted there (a link,
 * their file, a hard link) is refused, never followed: O_NOFOLLOW, fstat, fchmod, never chmod on a path (docs/cli.md).
 */
import {
  chmodSync,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  renameSync,
  type Stats,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config/configError.js';
import type { Logger } from '../log.js';

export class StateFileError extends ConfigError {
  constructor(message: string) {
    super(message, 'state_dir');
  }
}

const { O_CREAT, O_DIRECTORY, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_WRONLY } = constants;

/** Undefined where there are no uids (Windows). */
function ownUid(): number | undefined {
  return process.geteuid?.();
}

function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

function linkTarget(file: string): string {
  try {
    return readlinkSync(file);
  } catch {
    return 'somewhere';
  }
}

function kindOf(stats: Stats): string {
  if (stats.isSymbolicLink()) return 'a symbolic link';
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFile()) return 'a file';
  if (stats.isFIFO()) return 'a named pipe';
  if (stats.isSocket()) return 'a socket';
  return 'a device';
}

function symbolicLink(file: string): StateFileError {
  return new StateFileError(
    `${file} is a symbolic link (to ${linkTarget(file)}): Postern does not follow links in its state directory, nor change what they point at; remove the link`,
  );
}

/** `stats` from lstat, or fstat of a descriptor opened with O_NOFOLLOW. */
function checkOwn(file: string, stats: Stats, kind: 'file' | 'directory'): void {
  if (stats.isSymbolicLink()) throw symbolicLink(file);
  if (kind === 'file' ? !stats.isFile() : !stats.isDirectory())
    throw new StateFileError(
      `${file} is ${kindOf(stats)}, where Postern keeps a ${kind}: remove it`,
    );
  const uid = ownUid();
  if (uid !== undefined && stats.uid !== uid) {
    throw new StateFileError(
      `${file} is owned by uid ${stats.uid}, not by the user Postern runs as (uid ${uid}): that user could change it, so Postern does not use it; remove it, or chown it to uid ${uid} if it is Postern's`,
    );
  }
  if (kind === 'file' && stats.nlink > 1) {
    throw new StateFileError(
      `${file} has ${stats.nlink} hard links: it is also a file elsewhere, which Postern must not change; replace it with a copy of its own`,
    );
  }
}

/** fchmod: never a path a link could redirect. */
function tighten(fd: number, stats: Stats): boolean {
  const mode = stats.mode & 0o7777;
  if ((mode & 0o077) === 0) return false;
  fchmodSync(fd, mode & 0o700);
  return true;
}

/** ELOOP, or ENOTDIR with O_DIRECTORY, which Linux checks first. */
function openNoFollow(file: string, flags: number, mode?: number): number {
  try {
    return openSync(file, flags | O_NOFOLLOW, mode);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if ((code === 'ELOOP' || code === 'ENOTDIR') && isLink(file)) throw symbolicLink(file);
    throw err;
  }
}

function isLink(file: string): boolean {
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Created 0700 or tightened; a shared (sticky) one is refused. A configured path that is a link is followed, no mode changed through it. */
export function ensurePrivateDirectory(dir: string, logger?: Logger): boolean {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  let throughLink = false;
  let fd: number;
  try {
    fd = openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A link: ELOOP, or ENOTDIR with O_DIRECTORY (Linux checks that first).
    if ((code !== 'ELOOP' && code !== 'ENOTDIR') || !isLink(dir)) {
      if (code === 'ENOTDIR') throw new StateFileError(`${dir} is not a directory`);
      throw err;
    }
    throughLink = true;
    try {
      fd = openSync(dir, O_RDONLY | O_DIRECTORY);
    } catch (inner) {
      if ((inner as NodeJS.ErrnoException).code === 'ENOTDIR')
        throw new StateFileError(`${dir} is not a directory`);
      throw inner;
    }
  }
  try {
    const stats = fstatSync(fd);
    checkOwn(dir, stats, 'directory');
    const mode = stats.mode & 0o7777;
    if ((mode & 0o077) === 0) return false;
    if (mode & 0o1000) {
      throw new StateFileError(
        `${dir} is a shared directory (mode ${octal(mode)}, sticky bit): give Postern a state directory of its own`,
      );
    }
    if (throughLink) {
      throw new StateFileError(
        `${dir} is a symbolic link to ${linkTarget(dir)}, a directory other users can read (mode ${octal(mode)}): Postern does not change modes through a link; run chmod 700 on the directory itself`,
      );
    }
    try {
      tighten(fd, stats);
    } catch (err) {
      throw new StateFileError(
        `${dir} is readable by other users (mode ${octal(mode)}) and could not be made private (${(err as NodeJS.ErrnoException).code}): run chmod 700 on it, or choose another state_dir`,
      );
    }
  } finally {
    closeSync(fd);
  }
  logger?.warn({ state_dir: dir }, 'state directory was readable by other users; now 0700');
  return true;
}

export function ensurePrivateSubdirectory(dir: string): void {
  try {
    mkdirSync(dir, { mode: 0o700 });
    return;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  let fd: number;
  try {
    fd = openNoFollow(dir, O_RDONLY | O_DIRECTORY);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR')
      throw new StateFileError(
        `${dir} is ${kindOf(lstatSync(dir))}, where Postern keeps a directory: remove it`,
      );
    throw err;
  }
  try {
    const stats = fstatSync(fd);
    checkOwn(dir, stats, 'directory');
    tighten(fd, stats);
  } finally {
    closeSync(fd);
  }
}

/**
 * The index and its companions: checked with lstat and tightened with chmod on the path, never opened, since closing
 * another descriptor of a file drops every POSIX lock this process holds on it (SQLite's "How To Corrupt", 2.2).
 * Safe only because the caller made the directory private first.
 */
export function ensurePrivateFile(file: string, opts: { create: boolean }): void {
  if (opts.create) {
    try {
      // O_EXCL: an existing name, a link among them, is never followed.
      closeSync(openSync(file, O_CREAT | O_EXCL | O_WRONLY, 0o600));
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  let stats: Stats;
  try {
    stats = lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !opts.create) return;
    throw err;
  }
  checkOwn(file, stats, 'file');
  const mode = stats.mode & 0o7777;
  if (mode & 0o077) chmodSync(file, mode & 0o700);
}

export function checkOwnEntry(file: string, kind: 'file' | 'directory'): void {
  checkOwn(file, lstatSync(file), kind);
}

/** Checked and tightened, read through the same descriptor; null when there is none. */
export function readPrivateFile(file: string): Buffer | null {
  return readOwnFile(file, { tighten: true });
}

export function readOwnFile(
  file: string,
  opts: { tighten: boolean } = { tighten: false },
): Buffer | null {
  let fd: number;
  try {
    fd = openNoFollow(file, O_RDONLY | O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    const stats = fstatSync(fd);
    checkOwn(file, stats, 'file');
    if (opts.tighten) tighten(fd, stats);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** An existing file must be Postern's own, checked before it is truncated. Never through a link. */
export function writePrivateFile(file: string, data: string | Uint8Array, mode: number): void {
  const fd = openNoFollow(file, O_CREAT | O_WRONLY | O_NONBLOCK, mode);
  try {
    const stats = fstatSync(fd);
    checkOwn(file, stats, 'file');
    ftruncateSync(fd, 0);
    if ((stats.mode & 0o7777) !== mode) fchmodSync(fd, mode);
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    for (let offset = 0; offset < bytes.length; )
      offset += writeSync(fd, bytes, offset, bytes.length - offset);
  } finally {
    closeSync(fd);
  }
}

/** Via `<file>.tmp`, flushed, renamed, directory flushed: a crash leaves the old file or the new one, never a mix. */
export function replacePrivateFile(file: string, data: string | Uint8Array, mode: number): void {
  let existing: Stats | null = null;
  try {
    existing = lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (existing) checkOwn(file, existing, 'file');
  const temp = `${file}.tmp`;
  writePrivateFile(temp, data, mode);
  const fd = openNoFollow(temp, O_RDONLY | O_NONBLOCK);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, file);
  const dir = openSync(path.dirname(file), O_RDONLY | O_DIRECTORY);
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
