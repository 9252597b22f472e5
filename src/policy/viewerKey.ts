/**
 * Where the key public viewer links are signed with (policy/viewerTokens.ts) comes from: the
 * store's ViewerKeyStore (store/backend.ts): one SQLite node's `<state_dir>/viewer.key`, or
 * the row every node on PostgreSQL reads (CLUSTER.md: a node keeps no secret of its own but its
 * TLS material).
 */
import { type Clock, systemClock } from '../clock.js';
import type { Logger } from '../log.js';
import { backendOf } from '../store/backendOf.js';
import type { Queries } from '../store/queries.js';

export { VIEWER_KEY_FILE } from '../store/viewerKeyFile.js';

/**
 * The signing key of the store `store` belongs to, read once at start by the server and by
 * `postern message link`; whichever comes first creates it (stamped by the caller's clock).
 */
export function viewerSecret(
  store: Queries,
  stateDir: string,
  logger: Logger,
  clock: Clock = systemClock,
): Promise<Buffer> {
  return backendOf(store).viewerKey.secret(store, stateDir, logger, clock);
}
