import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';

const SECRET_FILE = 'viewer.key';
const SECRET_BYTES = 32;

/**
 * The key viewer links are signed with: created at first use in the state directory (0600,
 * never replaced), read afterwards. The server and the CLI both call this; whichever comes
 * first creates it (`wx`: the other reads what the first wrote).
 */
export function viewerSecret(stateDir: string): Buffer {
  const file = path.join(stateDir, SECRET_FILE);
  try {
    const fd = openSync(file, 'wx', 0o600);
    try {
      const secret = randomBytes(SECRET_BYTES);
      writeSync(fd, secret.toString('hex'));
      return secret;
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const text = readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(text)) throw new Error(`${file} is not a viewer key (64 hex digits); remove it to create a new one (old links stop working)`);
  return Buffer.from(text, 'hex');
}
