/**
 * Where the key public viewer links are signed with (policy/viewerTokens.ts) comes from. One
 * SQLite node: `<state_dir>/viewer.key`. Several nodes on PostgreSQL: the `viewer_key` row every
 * node reads (CLUSTER.md: a node keeps no secret of its own but its TLS material), so a link
 * made through one node or the CLI opens on every node.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { systemClock, type Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { readPrivateFile, StateFileError } from '../platform/privateFiles.js';
import type { Queries } from '../store/queries.js';
import { storedViewerKey, storeViewerKey } from '../store/viewerKey.js';

/** The key's file in a SQLite node's state directory (backups hold it too). */
export const VIEWER_KEY_FILE = 'viewer.key';
const KEY_BYTES = 32;

/**
 * The signing key of the store `store` belongs to, read once at start by the server and by
 * `postern message link`; whichever comes first creates it (stamped by the caller's clock).
 *
 * On PostgreSQL a node upgraded from one that signed with its own `viewer.key` finds that file
 * at its first start: when the database has no key yet, the file's key becomes the shared one
 * (links already handed out keep opening, now on every node). Once the database has a key, that
 * key is the one used; a file holding another is named in a warning (links signed with it stop
 * opening). No file is created on PostgreSQL.
 */
export async function viewerSecret(store: Queries, stateDir: string, logger: Logger, clock: Clock = systemClock): Promise<Buffer> {
  const file = path.join(stateDir, VIEWER_KEY_FILE);
  if (store.dialect === 'sqlite') return fileSecret(file);
  const stored = await storedViewerKey(store);
  if (stored) {
    warnIfStray(file, stored, logger);
    return stored;
  }
  const local = readKeyFile(file);
  const candidate = local ?? randomBytes(KEY_BYTES);
  const shared = await storeViewerKey(store, candidate, clock.now());
  if (!shared.equals(candidate)) {
    // Another node (or command) stored its key first.
    if (local) strayFileWarning(file, logger);
  } else if (local) {
    logger.info({ file }, 'viewer signing key imported from this file into the shared database: links signed with it open on every node; the file is no longer read');
  } else {
    logger.info('viewer signing key created in the shared database');
  }
  return shared;
}

/**
 * The state directory's key: created at first use (0600, never replaced), read afterwards. The
 * server and the CLI both call this; whichever comes first creates it (`wx`: the other reads what
 * the first wrote).
 */
function fileSecret(file: string): Buffer {
  try {
    const fd = openSync(file, 'wx', 0o600);
    try {
      const secret = randomBytes(KEY_BYTES);
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
function readKeyFile(file: string): Buffer | null {
  const bytes = readPrivateFile(file);
  if (bytes === null) return null;
  const text = bytes.toString('utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(text)) throw new Error(`${file} is not a viewer key (64 hex digits); remove it to create a new one (old links stop working)`);
  return Buffer.from(text, 'hex');
}

/** PostgreSQL, the database holding a key: a file left in the state directory that holds another is worth a warning. */
function warnIfStray(file: string, shared: Buffer, logger: Logger): void {
  let local: Buffer | null;
  try {
    local = readKeyFile(file);
  } catch (err) {
    if (err instanceof StateFileError) throw err;
    local = Buffer.alloc(0); // not a key at all: stray too
  }
  if (local && !local.equals(shared)) strayFileWarning(file, logger);
}

function strayFileWarning(file: string, logger: Logger): void {
  logger.warn({ file }, 'this file is not the viewer signing key the nodes share (the database\'s): links signed with it no longer open; remove it');
}
