/**
 * The public viewer's signing key as a file in the state directory (`viewer.key`, 64 hex
 * digits, 0600): where one SQLite node keeps it (backups hold it too), and where a node upgraded
 * to PostgreSQL finds the key it signed with before (store/postgres/sharedViewerKey.ts).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import { readPrivateFile } from '../platform/privateFiles.js';

/** The key's file in a node's state directory. */
export const VIEWER_KEY_FILE = 'viewer.key';
export const VIEWER_KEY_BYTES = 32;

/**
 * The state directory's key: created at first use (0600, never replaced), read afterwards. The
 * server and the CLI both call this; whichever comes first creates it (`wx`: the other reads what
 * the first wrote).
 */
export function fileSecret(file: string): Buffer {
  try {
    const fd = openSync(file, 'wx', 0o600);
    try {
      const secret = randomBytes(VIEWER_KEY_BYTES);
      writeSync(fd, secret.toString('hex'));
      return secret;
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return readKeyFile(file)!;
}

/**
 * The key a `viewer.key` file holds, or null when there is none. Whoever knows the key opens every
 * message: a link or another user's file is refused (exit 78), never read (privateFiles.ts).
 */
export function readKeyFile(file: string): Buffer | null {
  const bytes = readPrivateFile(file);
  if (bytes === null) return null;
  const text = bytes.toString('utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(text)) throw new Error(`${file} is not a viewer key (64 hex digits); remove it to create a new one (old links stop working)`);
  return Buffer.from(text, 'hex');
}

