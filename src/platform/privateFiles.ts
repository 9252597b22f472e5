import { chmodSync, closeSync, constants, mkdirSync, openSync, statSync } from 'node:fs';

/** Why a state directory was refused: the caller reports it as a config error on `state_dir`. */
export class PrivateDirectoryError extends Error {}

/**
 * The state directory holds provider passwords and API keys in clear (the relay needs them):
 * it is created 0700, and one that already exists with group or other bits is tightened to
 * 0700. A shared directory (sticky bit, as /tmp) is refused rather than changed, and so is one
 * this process may not change. Returns true when the mode was tightened.
 */
export function ensurePrivateDirectory(dir: string): boolean {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = statSync(dir);
  if (!stat.isDirectory()) throw new PrivateDirectoryError(`${dir} is not a directory`);
  const mode = stat.mode & 0o7777;
  if ((mode & 0o077) === 0) return false;
  const octal = mode.toString(8).padStart(4, '0');
  if (mode & 0o1000) {
    throw new PrivateDirectoryError(`${dir} is a shared directory (mode ${octal}, sticky bit): give Postern a state directory of its own`);
  }
  try {
    chmodSync(dir, mode & 0o700);
  } catch (err) {
    throw new PrivateDirectoryError(`${dir} is readable by other users (mode ${octal}) and could not be made private (${(err as NodeJS.ErrnoException).code}): run chmod 700 on it, or choose another state_dir`);
  }
  return true;
}

/**
 * Takes group and other bits off `file`; with `create`, first creates it empty with mode 0600
 * if it does not exist. SQLite creates a database 0644 (less the umask) and gives its -wal and
 * -shm files the database's own mode, so a database made private first keeps all three private.
 */
export function ensurePrivateFile(file: string, opts: { create: boolean }): void {
  try {
    if (opts.create) {
      closeSync(openSync(file, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600));
      return;
    }
    const mode = statSync(file).mode & 0o7777;
    if (mode & 0o077) chmodSync(file, mode & 0o700);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return ensurePrivateFile(file, { create: false });
    if (code !== 'ENOENT' || opts.create) throw err;
  }
}
