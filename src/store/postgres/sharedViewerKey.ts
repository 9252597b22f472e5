import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';
import { StateFileError } from '../../platform/privateFiles.js';
import type { Queries } from '../queries.js';
import { storedViewerKey, storeViewerKey } from '../viewerKey.js';
import { readKeyFile, VIEWER_KEY_BYTES, VIEWER_KEY_FILE } from '../viewerKeyFile.js';

/**
 * The key the nodes share, as the `viewer_key` row (store/viewerKey.ts), so a link made through
 * one node or the CLI opens on every node. A node upgraded from one that signed with its own
 * `viewer.key` finds that file at its first start: when the database has no key yet, the file's
 * key becomes the shared one (links already handed out keep opening, now on every node). Once
 * the database has a key, that key is the one used; a file holding another is named in a
 * warning (links signed with it stop opening). No file is created.
 */
export async function sharedViewerSecret(
  store: Queries,
  stateDir: string,
  logger: Logger,
  clock: Clock,
): Promise<Buffer> {
  const file = path.join(stateDir, VIEWER_KEY_FILE);
  const stored = await storedViewerKey(store);
  if (stored) {
    warnIfStray(file, stored, logger);
    return stored;
  }
  const local = readKeyFile(file);
  const candidate = local ?? randomBytes(VIEWER_KEY_BYTES);
  const shared = await storeViewerKey(store, candidate, clock.now());
  if (!shared.equals(candidate)) {
    // Another node (or command) stored its key first.
    if (local) strayFileWarning(file, logger);
  } else if (local) {
    logger.info(
      { file },
      'viewer signing key imported from this file into the shared database: links signed with it open on every node; the file is no longer read',
    );
  } else {
    logger.info('viewer signing key created in the shared database');
  }
  return shared;
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
  logger.warn(
    { file },
    "this file is not the viewer signing key the nodes share (the database's): links signed with it no longer open; remove it",
  );
}
