import type { PosternConfig } from '../config/load.js';
import { MAX_PENDING_REFUSALS } from '../http/connectionLimit.js';
import type { Logger } from '../log.js';
import { openFileLimit } from '../platform/openFileLimit.js';

/** Index, spool files, listeners, threads. */
const BASE_DESCRIPTORS = 100;

/** The connection caps bound descriptors only if the process may open that many. */
export function warnIfFewDescriptors(
  config: Pick<PosternConfig, 'listeners' | 'http' | 'smtp'> & {
    console: Pick<PosternConfig['console'], 'max_connections'>;
  },
  logger: Logger,
): void {
  const limit = openFileLimit();
  const smtp = config.listeners.some((l) => l.protocol === 'smtp') ? config.smtp.max_clients : 0;
  const consoles = config.listeners.some((l) => l.protocol === 'console')
    ? config.console.max_connections + MAX_PENDING_REFUSALS
    : 0;
  const needed =
    config.http.max_connections + MAX_PENDING_REFUSALS + consoles + smtp + BASE_DESCRIPTORS;
  if (limit !== null && limit < needed) {
    logger.warn(
      {
        open_file_limit: limit,
        needed,
        http_max_connections: config.http.max_connections,
        console_max_connections: consoles === 0 ? 0 : config.console.max_connections,
        smtp_max_clients: smtp,
      },
      'the open-file limit (ulimit -n) is below what the connection caps allow: raise it, or lower http.max_connections / console.max_connections / smtp.max_clients',
    );
  }
}
