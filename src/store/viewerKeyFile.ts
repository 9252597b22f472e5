/** `viewer.key`: one SQLite node's key, and where a node upgraded to PostgreSQL finds the key it signed with before. */
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import { readPrivateFile } from '../platform/privateFiles.js';

export const VIEWER_KEY_FILE = 'viewer.key';
export const VIEWER_KEY_BYTES = 32;

/** Never replaced; the server and the CLI race with `wx`, the loser reads what the winner wrote. */
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

/** Whoever knows the key opens every message: a link or another user's file is refused, never read. */
export function readKeyFile(file: string): Buffer | null {
  const bytes = readPrivateFile(file);
  if (bytes === null) return null;
  const text = bytes.toString('utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(text))
    throw new Error(
      `${file} is not a viewer key (64 hex digits); remove it to create a new one (old links stop working)`,
    );
  return Buffer.from(text, 'hex');
}
